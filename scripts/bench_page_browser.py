#!/usr/bin/env python3
"""How long a study page takes to load and draw in headless Chromium:
from navigation to the end of the load event (the page's script draws the
stage table, the graph's handlers, the timeline with its zoom and labels,
and the node list in it), median of --repeat loads, per page given; and
how the page lays out at 1400 px wide: its height and where each section
(`h2`) starts, in pixels and in screens of 900 px.

Needs `chromedriver` (Debian's chromium-driver). Usage:
  scripts/bench_page_browser.py [--repeat 5] PAGE.html [PAGE.html ...]
"""
import argparse
import json
import statistics
import subprocess
import time
import urllib.request

PORT = 9517


def call(method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["value"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
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
            "args": ["--headless=new", "--no-sandbox", "--window-size=1400,1800"]}}}}
        session = call("POST", "/session", caps)["sessionId"]
        try:
            for page in args.pages:
                times = []
                for _ in range(args.repeat):
                    call("POST", f"/session/{session}/url", {"url": "file://" + page})
                    ms = call("POST", f"/session/{session}/execute/sync", {
                        "script": "const n = performance.getEntriesByType('navigation')[0];"
                                  "return n.loadEventEnd - n.startTime;", "args": []})
                    times.append(ms)
                print(f"{page}: load and draw, median {statistics.median(times):.0f} ms "
                      f"(min {min(times):.0f}, max {max(times):.0f}) over {len(times)}")
                layout = call("POST", f"/session/{session}/execute/sync", {
                    "script": "return [document.documentElement.scrollHeight,"
                              " [...document.querySelectorAll('h2')].map(h =>"
                              " [h.textContent.trim(), Math.round(h.getBoundingClientRect().top + scrollY)])];",
                    "args": []})
                height, sections = layout
                print(f"  page height {height} px ({height / 900:.1f} screens of 900 px)")
                for title, top in sections:
                    print(f"  {top:>7} px  screen {top // 900 + 1:>3}  {title}")
        finally:
            call("DELETE", f"/session/{session}")
    finally:
        driver.terminate()


if __name__ == "__main__":
    main()
