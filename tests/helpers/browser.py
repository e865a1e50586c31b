"""Debian's headless Chromium driven through Selenium and chromedriver: the try-it page's
tests (tests/serving/test_page.py) and the docs' screenshots (docsite/screenshots.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = "needs Chromium and chromedriver: apt-get install chromium chromium-driver"


def chrome(width: int = 1000, height: int = 900):
    """A headless Chromium window of `width` x `height` (a selenium WebDriver; quit it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_text(driver, element_id: str, predicate: Callable[[str], bool],
              seconds: float = 30) -> str:
    """The text of the element `element_id` once `predicate` holds for it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, seconds).until(
        lambda d: predicate(d.find_element(By.ID, element_id).text))
    return driver.find_element(By.ID, element_id).text


def choose_model(driver, name: str) -> None:
    """Picks the try-it page's model `name` and waits for its details."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "model")).select_by_value(name)
    wait_text(driver, "details", lambda t: t.startswith(f"{name}, version"))
