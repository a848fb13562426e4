"""Headless Debian Chromium through its ChromeDriver, for the review app's test and bench."""

from __future__ import annotations

import shutil

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def headless_chromium(width: int = 1400, height: int = 1100) -> webdriver.Chrome:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "install Debian's chromium and chromium-driver (make test does)"
    options = Options()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))
