"""Headless Chromium for the phone pages (playwright driving the system's chromium)."""
from __future__ import annotations

import contextlib
import shutil

import pytest


def chromium():
    """(the chromium executable, playwright's sync_playwright); skips when either is missing."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("headless Chromium test: no `chromium` on PATH (Debian: apt-get install chromium; .ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("headless Chromium test: the playwright package is not installed (it is in the test extra)")
    return exe, sync_playwright


@contextlib.contextmanager
def phone(url: str):
    """A page of headless Chromium the size of a phone, opened at ``url`` (skips when Chromium
    cannot start here: a sandbox without its libraries)."""
    exe, sync_playwright = chromium()
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        except Exception as e:  # noqa: BLE001 - a sandbox without the libraries Chromium needs
            pytest.skip(f"headless Chromium cannot start here: {type(e).__name__}: {str(e)[:200]}")
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(url)
            yield page
        finally:
            browser.close()
