"""A headless Chromium session through chromedriver's W3C WebDriver
protocol, for the page scripts (`bench_page_browser.py`,
`page_section_shot.py`): no Python package beyond the standard library.

    with Session(port) as s:
        s.call("POST", "/url", {"url": "file:///…/report.html"})
        s.script("return document.title;")
"""
import json
import subprocess
import time
import urllib.request


class Session:
    """chromedriver on `port` and one browser session, 1400 px wide."""

    def __init__(self, port, height=1800):
        self.port = port
        self.height = height

    def request(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req))["value"]

    def call(self, method, path, body=None):
        """A command of this session: `path` after `/session/<id>`."""
        return self.request(method, f"/session/{self.id}{path}", body)

    def script(self, source, *args):
        return self.call("POST", "/execute/sync", {"script": source, "args": list(args)})

    def __enter__(self):
        self.driver = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):
            try:
                self.request("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "args": ["--headless=new", "--no-sandbox", "--hide-scrollbars",
                     f"--window-size=1400,{self.height}"]}}}}
        try:
            self.id = self.request("POST", "/session", caps)["sessionId"]
        except Exception:
            self.driver.terminate()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.request("DELETE", f"/session/{self.id}")
        finally:
            self.driver.terminate()
