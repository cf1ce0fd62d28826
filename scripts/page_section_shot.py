#!/usr/bin/env python3
"""A screenshot of one element of a study page (a section, by CSS
selector), in headless Chromium at 1400 px wide, after the page's script
has drawn it: for the book's before/after pictures of a section far down
the page (the Comparison under a long stage table).

Needs `chromedriver` (Debian's chromium-driver). Usage:
  scripts/page_section_shot.py PAGE.html SELECTOR OUT.png
e.g. scripts/page_section_shot.py out/report.html '#comparison' compare.png
"""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webdriver import Session  # noqa: E402

PORT = 9518


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    page, selector, out = sys.argv[1:]
    with Session(PORT) as s:
        s.call("POST", "/url", {"url": "file://" + page})
        # The element's box in the page, captured whole (beyond the window,
        # and with what its overflow scrolls out of view).
        x, y, w, h = s.script(
            "const e = document.querySelector(arguments[0]);"
            "const r = e.getBoundingClientRect();"
            "return [r.left + scrollX, r.top + scrollY, Math.max(r.width, e.scrollWidth), r.height];",
            selector)
        png = s.call("POST", "/goog/cdp/execute", {
            "cmd": "Page.captureScreenshot",
            "params": {"captureBeyondViewport": True,
                       "clip": {"x": x, "y": y, "width": w, "height": h, "scale": 1}}})["data"]
    with open(out, "wb") as f:
        f.write(base64.b64decode(png))
    print(f"{out}: {selector} of {page}")


if __name__ == "__main__":
    main()
