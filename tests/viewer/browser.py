"""Headless Chromium (Debian's build and its chromedriver) driven by Selenium, offline."""

from __future__ import annotations

import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def have_chromium() -> bool:
    """Whether Debian's chromium and chromedriver are installed."""
    return shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None


def start_chromium(width: int = 1440, height: int = 1000) -> webdriver.Chrome:
    """A headless Chromium that records its network events in the performance log.

    The driver binary and the browser are given explicitly, so Selenium Manager never runs
    (it would try to download a driver).
    """
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
