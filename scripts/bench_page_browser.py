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
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webdriver import Session  # noqa: E402

PORT = 9517


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
    with Session(PORT) as s:
        for page in args.pages:
            times = []
            for _ in range(args.repeat):
                s.call("POST", "/url", {"url": "file://" + page})
                times.append(s.script("const n = performance.getEntriesByType('navigation')[0];"
                                      "return n.loadEventEnd - n.startTime;"))
            print(f"{page}: load and draw, median {statistics.median(times):.0f} ms "
                  f"(min {min(times):.0f}, max {max(times):.0f}) over {len(times)}")
            height, sections = s.script(
                "return [document.documentElement.scrollHeight,"
                " [...document.querySelectorAll('h2')].map(h =>"
                " [h.textContent.trim(), Math.round(h.getBoundingClientRect().top + scrollY)])];")
            print(f"  page height {height} px ({height / 900:.1f} screens of 900 px)")
            for title, top in sections:
                print(f"  {top:>7} px  screen {top // 900 + 1:>3}  {title}")


if __name__ == "__main__":
    main()
