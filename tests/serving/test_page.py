"""t2t-serve's try-it page in a real browser (Debian's headless Chromium through Selenium
and chromedriver): pick a model, type text or choose an image, read the output and a
transformer's attention heat map, and a screenshot. Skipped, saying why, where Chromium
is not installed (.ci/run installs it)."""

import os
import shutil

import pytest

from tests.helpers.model_checks import push_down_pad_and_eos
from tests.helpers.serving import ServerThread, save_image_toy, save_toy

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Chromium and chromedriver: apt-get install chromium chromium-driver")


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1000,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    text_base, image_base = str(root / "text"), str(root / "image")
    os.makedirs(text_base)
    os.makedirs(image_base)
    save_toy(text_base, 3, "v3:")
    save_image_toy(image_base, 1)
    with ServerThread({"shout": text_base, "sizes": image_base}) as running:
        yield running


def _wait_text(driver, element_id, predicate, seconds=30):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, seconds).until(
        lambda d: predicate(d.find_element(By.ID, element_id).text))
    return driver.find_element(By.ID, element_id).text


def _choose_model(driver, name):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "model")).select_by_value(name)
    _wait_text(driver, "details", lambda t: t.startswith(f"{name}, version"))


def test_type_text_and_read_the_output(browser, server, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/")
    _wait_text(browser, "details", lambda t: "version" in t)
    _choose_model(browser, "shout")
    assert "signature serving_default" in browser.find_element(By.ID, "details").text
    browser.find_element(By.ID, "input").send_keys("hello page")
    browser.find_element(By.ID, "run").click()
    assert _wait_text(browser, "output", lambda t: t not in ("", "…")) == "v3:HELLO PAGE"
    assert "lengths" in browser.find_element(By.ID, "extras").text  # the other outputs
    shot = tmp_path / "page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 5000
    # An empty input is refused on the page, before any request.
    browser.find_element(By.ID, "input").clear()
    browser.find_element(By.ID, "run").click()
    assert "type an input first" in _wait_text(browser, "error", bool)


def test_choose_an_image_file(browser, server, tmp_path):
    import numpy as np
    import tensorflow as tf
    from selenium.webdriver.common.by import By

    png = tmp_path / "seven_by_five.png"
    png.write_bytes(tf.io.encode_png(np.zeros((7, 5, 3), np.uint8)).numpy())
    browser.get(server.url + "/")
    _wait_text(browser, "details", lambda t: "version" in t)
    _choose_model(browser, "sizes")
    assert not browser.find_element(By.ID, "file").get_attribute("hidden")
    browser.find_element(By.ID, "file").send_keys(str(png))
    browser.find_element(By.ID, "run").click()
    assert _wait_text(browser, "output", lambda t: t not in ("", "…")) == "7x5"
    # Bytes the model cannot decode: the server's 400 message appears on the page.
    bad = tmp_path / "not_an_image.png"
    bad.write_bytes(b"this is not a PNG")
    browser.find_element(By.ID, "file").send_keys(str(bad))
    browser.find_element(By.ID, "run").click()
    assert "the model rejected the input" in _wait_text(browser, "error", bool)


# ------------------------------------------------------------ attention heat map
PROBLEM = "algorithmic_reverse_binary40_test"


@pytest.fixture(scope="module")
def transformer_server(tmp_path_factory):
    """t2t-serve serving a real transformer_test export (with its attention signature)."""

    from t2t import registry
    from t2t.decoding import decoder as decoder_lib
    from t2t.hparams.basic import create_hparams
    from t2t.serving import export as export_lib
    from tests.helpers.runs import untrained_run

    root = tmp_path_factory.mktemp("page_attention")
    data_dir, run = untrained_run(PROBLEM, root)
    problem, hparams = registry.problem(PROBLEM), create_hparams("transformer_test")
    model = decoder_lib.load_model(problem, "transformer", hparams, data_dir, run)
    # As tests/serving/test_export.py: push PAD and EOS down, so that outputs are not empty.
    push_down_pad_and_eos(model, eos_logit=-0.4)
    export_lib.export(problem, "transformer", hparams, data_dir, run, None,
                      "beam_size=1,extra_length=3", parity_check=False, model=model)
    with ServerThread({"tiny": os.path.join(run, "export")}) as running:
        yield running


def _cells(driver):
    """The heat map's weights as drawn: [[float, ...] per row] and the row/column labels."""
    from selenium.webdriver.common.by import By

    table = driver.find_element(By.CSS_SELECTOR, "#heatmap table.heat")
    columns = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")][1:]
    rows, labels = [], []
    for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        labels.append(tr.find_element(By.TAG_NAME, "th").text)
        rows.append([float(td.get_attribute("data-weight"))
                     for td in tr.find_elements(By.CSS_SELECTOR, "td.cell")])
    return rows, labels, columns


def test_attention_heat_map_of_a_transformer(browser, transformer_server, tmp_path):
    import numpy as np
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(transformer_server.url + "/")
    _wait_text(browser, "details", lambda t: "version" in t)
    _choose_model(browser, "tiny")
    assert "attention heat map" in browser.find_element(By.ID, "details").text
    browser.find_element(By.ID, "input").send_keys("1 0 1 1")
    browser.find_element(By.ID, "run").click()
    output = _wait_text(browser, "output", lambda t: t not in ("", "…"))
    WebDriverWait(browser, 30).until(
        lambda d: not d.find_element(By.ID, "attention").get_attribute("hidden"))
    status, reply = transformer_server.call("/v1/models/tiny:predict", {
        "signature_name": "attention", "instances": [{"inputs": "1 0 1 1", "outputs": output}]})
    assert status == 200, reply
    served = reply["predictions"][0]
    weights = np.asarray(served["weights"])  # [layers, heads, T, S]
    assert weights.shape[:2] == (2, 2)  # transformer_test
    assert served["source_tokens"] == ["1", "0", "1", "1", "<EOS>"]
    assert served["target_tokens"] == [*output.split(), "<EOS>"]
    for layer, head in ((0, 0), (1, 1)):
        Select(browser.find_element(By.ID, "layer")).select_by_value(str(layer))
        Select(browser.find_element(By.ID, "head")).select_by_value(str(head))
        rows, labels, columns = _cells(browser)
        assert labels == served["target_tokens"] and columns == served["source_tokens"]
        np.testing.assert_allclose(rows, weights[layer, head], atol=1e-6)
        np.testing.assert_allclose(np.sum(rows, axis=1), 1.0, atol=1e-5)
    shot = tmp_path / "attention.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 5000
