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
import json
import subprocess
import sys
import time
import urllib.request

PORT = 9518


def call(method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["value"]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    page, selector, out = sys.argv[1:]
    driver = subprocess.Popen(["chromedriver", f"--port={PORT}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "args": ["--headless=new", "--no-sandbox", "--hide-scrollbars",
                     "--window-size=1400,1800"]}}}}
        session = call("POST", "/session", caps)["sessionId"]
        try:
            call("POST", f"/session/{session}/url", {"url": "file://" + page})
            # The element's box in the page, captured whole (beyond the
            # window, and with what its overflow scrolls out of view).
            rect = call("POST", f"/session/{session}/execute/sync", {
                "script": "const e = document.querySelector(arguments[0]);"
                          "const r = e.getBoundingClientRect();"
                          "return [r.left + scrollX, r.top + scrollY, Math.max(r.width, e.scrollWidth), r.height];",
                "args": [selector]})
            x, y, w, h = rect
            png = call("POST", f"/session/{session}/goog/cdp/execute", {
                "cmd": "Page.captureScreenshot",
                "params": {"captureBeyondViewport": True,
                           "clip": {"x": x, "y": y, "width": w, "height": h, "scale": 1}}})["data"]
            with open(out, "wb") as f:
                f.write(base64.b64decode(png))
            print(f"{out}: {selector} of {page}")
        finally:
            call("DELETE", f"/session/{session}")
    finally:
        driver.terminate()


if __name__ == "__main__":
    main()
