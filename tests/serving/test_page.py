"""t2t-serve's try-it page in a real browser (Debian's headless Chromium through Selenium
and chromedriver): pick a model, type text or choose an image, read the output, and a
screenshot. Skipped, saying why, where Chromium is not installed (.ci/run installs it)."""

import os
import shutil

import pytest

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
