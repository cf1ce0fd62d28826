//! A small WebDriver client for the page tests: it starts Debian's
//! `chromedriver`, opens a headless Chromium session and speaks the W3C
//! WebDriver protocol (JSON over HTTP/1.1) over a plain TCP socket.
//!
//! Where `chromium` or `chromedriver` is missing, [`Browser::start`] says so
//! and returns None (the test is skipped), unless `VITGRAPH_REQUIRE_BROWSER`
//! is set (CI installs both), when it panics instead.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

fn find(names: &[&str]) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

impl Browser {
    /// A headless Chromium under chromedriver, or None where either is missing.
    pub fn start() -> Option<Browser> {
        let required = std::env::var_os("VITGRAPH_REQUIRE_BROWSER").is_some();
        let (Some(driver), Some(chromium)) = (
            find(&["chromedriver", "chromium-driver"]),
            find(&["chromium", "chromium-browser", "google-chrome"]),
        ) else {
            assert!(
                !required,
                "VITGRAPH_REQUIRE_BROWSER is set but chromium or chromedriver is missing: `apt-get install chromium chromium-driver`"
            );
            eprintln!("skipped: chromium and chromedriver are not installed (`apt-get install chromium chromium-driver`)");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let mut b = Browser {
            driver: child,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while b.call("GET", "/status", None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000", "--hide-scrollbars"]
            },
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let v = b.call("POST", "/session", Some(caps)).expect("a session");
        b.session = v["sessionId"].as_str().expect("a session id").to_string();
        Some(b)
    }

    /// One WebDriver command; its `value`, or the error it answered.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60))).ok();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        // chromedriver may keep the connection open: read the header, then
        // exactly the body its length names (or chunks up to the last).
        let mut raw = Vec::new();
        let mut buf = [0u8; 65536];
        let split = loop {
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = s.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed before the header".into());
            }
            raw.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
        let length = head.lines().find_map(|l| {
            l.strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
        let chunked = head.contains("transfer-encoding: chunked");
        let mut content = raw[split + 4..].to_vec();
        loop {
            let done = match length {
                Some(n) => content.len() >= n,
                None if chunked => content.windows(5).any(|w| w == b"0\r\n\r\n"),
                None => false,
            };
            if done {
                break;
            }
            let n = s.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            content.extend_from_slice(&buf[..n]);
        }
        if chunked {
            content = dechunk(&content);
        }
        let v: Value = serde_json::from_slice(&content).map_err(|e| format!("{e}: {head}"))?;
        if head.starts_with("http/1.1 2") {
            Ok(v["value"].clone())
        } else {
            Err(v["value"].to_string())
        }
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// Opens a file in the browser and waits for the page's script to finish.
    pub fn open(&self, file: &Path) {
        let url = format!("file://{}", file.canonicalize().unwrap().display());
        self.session_call("POST", "/url", Some(json!({ "url": url })));
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.js("return document.body && document.body.dataset.ready === '1';") != json!(true)
        {
            assert!(
                Instant::now() < deadline,
                "the page's script did not finish"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `script` in the page (a function body; `arguments` as usual).
    pub fn js(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    /// Clicks the first element `css` selects.
    pub fn click(&self, css: &str) {
        let e = self.session_call(
            "POST",
            "/element",
            Some(json!({ "using": "css selector", "value": css })),
        );
        let id = e[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element `{css}`: {e}"))
            .to_string();
        self.session_call("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// The browser console's messages since the last call: (level, text).
    pub fn console(&self) -> Vec<(String, String)> {
        let v = self.session_call("POST", "/se/log", Some(json!({ "type": "browser" })));
        v.as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                (
                    m["level"].as_str().unwrap_or("").to_string(),
                    m["message"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// The console's errors and warnings since the last look.
    pub fn problems(&self) -> Vec<(String, String)> {
        self.console()
            .into_iter()
            .filter(|(level, _)| level == "SEVERE" || level == "WARNING")
            .collect()
    }

    /// A PNG of the whole page (the window grown to the page's height).
    pub fn screenshot(&self, to: &Path) {
        let h = self
            .js("return Math.ceil(document.documentElement.scrollHeight);")
            .as_f64()
            .unwrap_or(1000.0)
            .clamp(600.0, 12_000.0);
        self.session_call(
            "POST",
            "/window/rect",
            Some(json!({ "width": 1400, "height": h as i64 + 100 })),
        );
        let b64 = self.session_call("GET", "/screenshot", None);
        let png = base64(b64.as_str().expect("base64 text"));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(to, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&b[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[end + 2..end + 2 + size]);
        b = &b[end + 2 + size + 2..];
    }
}

fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
