"""Save a PNG of a transcript page (``trl-env view``) as headless Chromium shows it, for docs/viewer.md.

Run: python scripts/screenshot_page.py outputs/demo/transcripts.html docs/viewer.png [--select N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.viewer.browser import start_chromium  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("png")
    parser.add_argument("--select", type=int, default=None, help="click the N-th episode row first")
    args = parser.parse_args()
    driver = start_chromium()
    try:
        driver.get(Path(args.page).resolve().as_uri())
        time.sleep(1.0)  # the page renders its list and plots from the embedded records
        if args.select is not None:
            from selenium.webdriver.common.by import By

            driver.find_elements(By.CSS_SELECTOR, "tbody tr")[args.select].click()
            time.sleep(0.3)
        driver.save_screenshot(args.png)
    finally:
        driver.quit()
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
