"""t2t-serve's try-it page in a real browser (Debian's headless Chromium through Selenium
and chromedriver): pick a model, type text or choose an image or a WAV file, read the
output and a transformer's attention heat map, and a screenshot. Skipped, saying why,
where Chromium is not installed (.ci/run installs it). A language model's sampling
controls and streamed output: tests/serving/test_lm_export.py, which has a trained LM."""

import base64
import json
import os

import pytest
import tensorflow as tf

from t2t.serving import audio_serving
from tests.helpers.browser import CHROMEDRIVER, CHROMIUM, MISSING, choose_model, chrome, wait_text
from tests.helpers.model_checks import push_down_pad_and_eos
from tests.helpers.serving import ServerThread, save_image_toy, save_toy

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)


@pytest.fixture(scope="module")
def browser():
    driver = chrome(1000, 900)
    yield driver
    driver.quit()


class SpeechToy(tf.Module):
    """A "speech recognizer" reading WAV bytes as speech exports do (audio_serving.wav_ids:
    16-bit mono at the problem's rate, else InvalidArgument); says how many samples."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def transcribe(self, inputs):
        samples = tf.reduce_sum(tf.cast(audio_serving.wav_ids(inputs, SAMPLE_RATE) > 0, tf.int32), 1)
        return {"outputs": tf.strings.join([tf.strings.as_string(samples), " samples"])}


SAMPLE_RATE = 16000


def save_speech_toy(base: str, version: int) -> str:
    """SpeechToy as version `version`, with the t2t_export.json fields of a speech export
    that the page reads (the inputs' audio modality and sample rate)."""
    toy = SpeechToy()
    final = os.path.join(base, str(version))
    tf.saved_model.save(toy, final, signatures={"serving_default": toy.transcribe})
    os.makedirs(os.path.join(final, "assets.extra"))
    with open(os.path.join(final, "assets.extra", "t2t_export.json"), "w") as f:
        json.dump({"problem": "toy_speech", "model": "speech_toy",
                   "problem_hparams": {"modality": {"inputs": "audio", "targets": "symbol"},
                                       "audio_sample_rate": SAMPLE_RATE},
                   "encoders": {"inputs": None, "targets": {"type": "text"}}}, f)
    return final


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    text_base, image_base, speech_base = str(root / "text"), str(root / "image"), str(root / "speech")
    os.makedirs(text_base)
    os.makedirs(image_base)
    save_toy(text_base, 3, "v3:")
    save_image_toy(image_base, 1)
    save_speech_toy(speech_base, 1)
    with ServerThread({"shout": text_base, "sizes": image_base, "speech": speech_base}) as running:
        yield running


def test_type_text_and_read_the_output(browser, server, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/")
    wait_text(browser, "details", lambda t: "version" in t)
    choose_model(browser, "shout")
    assert "signature serving_default" in browser.find_element(By.ID, "details").text
    browser.find_element(By.ID, "input").send_keys("hello page")
    browser.find_element(By.ID, "run").click()
    assert wait_text(browser, "output", lambda t: t not in ("", "…")) == "v3:HELLO PAGE"
    assert "lengths" in browser.find_element(By.ID, "extras").text  # the other outputs
    shot = tmp_path / "page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 5000
    # An empty input is refused on the page, before any request.
    browser.find_element(By.ID, "input").clear()
    browser.find_element(By.ID, "run").click()
    assert "type an input first" in wait_text(browser, "error", bool)


def test_choose_an_image_file(browser, server, tmp_path):
    import numpy as np
    import tensorflow as tf
    from selenium.webdriver.common.by import By

    png = tmp_path / "seven_by_five.png"
    png.write_bytes(tf.io.encode_png(np.zeros((7, 5, 3), np.uint8)).numpy())
    browser.get(server.url + "/")
    wait_text(browser, "details", lambda t: "version" in t)
    choose_model(browser, "sizes")
    assert not browser.find_element(By.ID, "file").get_attribute("hidden")
    browser.find_element(By.ID, "file").send_keys(str(png))
    browser.find_element(By.ID, "run").click()
    assert wait_text(browser, "output", lambda t: t not in ("", "…")) == "7x5"
    # Bytes the model cannot decode: the server's 400 message appears on the page.
    bad = tmp_path / "not_an_image.png"
    bad.write_bytes(b"this is not a PNG")
    browser.find_element(By.ID, "file").send_keys(str(bad))
    browser.find_element(By.ID, "run").click()
    assert "the model rejected the input" in wait_text(browser, "error", bool)


def test_send_a_wav_file_to_a_speech_export(browser, server, tmp_path):
    import numpy as np
    import soundfile
    from selenium.webdriver.common.by import By

    good, wrong_rate = tmp_path / "hello.wav", tmp_path / "hello_22k.wav"
    soundfile.write(str(good), np.arange(1234, dtype=np.int16), SAMPLE_RATE, subtype="PCM_16")
    soundfile.write(str(wrong_rate), np.zeros(500, np.int16), 22050, subtype="PCM_16")
    browser.get(server.url + "/")
    wait_text(browser, "details", lambda t: "version" in t)
    choose_model(browser, "speech")
    assert "WAV at 16000 Hz" in browser.find_element(By.ID, "details").text
    assert browser.find_element(By.ID, "text-input").get_attribute("hidden")
    assert "16000 Hz" in browser.find_element(By.ID, "file-label").text
    browser.find_element(By.ID, "run").click()  # no file yet: refused on the page
    assert "choose a WAV file first" in wait_text(browser, "error", bool)
    browser.find_element(By.ID, "file").send_keys(str(good))
    browser.find_element(By.ID, "run").click()
    shown = wait_text(browser, "output", lambda t: t not in ("", "…"))
    wav = base64.b64encode(good.read_bytes()).decode()
    assert (shown, server.call("/v1/models/speech:predict", {"instances": [{"b64": wav}]})) == (
        "1234 samples", (200, {"predictions": ["1234 samples"]}))
    # A WAV at another rate: the server's 400 names both rates, and the page shows it.
    browser.find_element(By.ID, "file").send_keys(str(wrong_rate))
    browser.find_element(By.ID, "run").click()
    error = wait_text(browser, "error", bool)
    assert "the model takes WAV at 16000 Hz; resample the request to it" in error
    assert browser.find_element(By.ID, "output").text == ""


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
    wait_text(browser, "details", lambda t: "version" in t)
    choose_model(browser, "tiny")
    assert "attention heat map" in browser.find_element(By.ID, "details").text
    browser.find_element(By.ID, "input").send_keys("1 0 1 1")
    browser.find_element(By.ID, "run").click()
    output = wait_text(browser, "output", lambda t: t not in ("", "…"))
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
