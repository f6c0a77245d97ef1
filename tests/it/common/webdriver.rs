//! A minimal W3C WebDriver client over reqwest, enough to drive headless
//! Chromium through chromedriver: navigate, find elements, click, type, run
//! JavaScript, resize, take screenshots.
//!
//! [`Browser::launch`] starts chromedriver on a free loopback port and opens a
//! session with a fresh profile. [`launch_or_skip`] is what tests call: without
//! chromedriver it fails when `SITEGATE_REQUIRE_BROWSER=1` (CI) and otherwise
//! prints a skip notice.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::{Client, Method};
use serde_json::{json, Value};

/// The key of an element reference in WebDriver JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Chromium flags: headless, and quiet on a closed network (without the
/// background-networking flags its connections are refused here).
const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,1000",
];

/// chromedriver and Chromium, from `CHROMEDRIVER`/`CHROMIUM` or Debian's paths.
fn binaries() -> Option<(PathBuf, PathBuf)> {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let driver = pick("CHROMEDRIVER", "/usr/bin/chromedriver");
    let chromium = pick("CHROMIUM", "/usr/bin/chromium");
    (driver.is_file() && chromium.is_file()).then_some((driver, chromium))
}

/// A browser for `test`, or `None` (after a notice) when chromedriver or
/// Chromium is not installed. With `SITEGATE_REQUIRE_BROWSER=1` a missing
/// browser fails the test instead.
pub async fn launch_or_skip(test: &str) -> Option<Browser> {
    launch_or_skip_with(test, &[]).await
}

/// [`launch_or_skip`] with more Chromium flags.
pub async fn launch_or_skip_with(test: &str, extra: &[String]) -> Option<Browser> {
    if binaries().is_none() {
        let required = super::required("BROWSER");
        assert!(
            !required,
            "{test}: SITEGATE_REQUIRE_BROWSER=1 but chromedriver or chromium is missing \
             (apt-get install -y chromium chromium-driver, or set CHROMEDRIVER and CHROMIUM)"
        );
        // The notice is the point: a skipped browser test must say so in the log.
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
            "SKIPPED {test}: chromedriver or chromium is not installed \
             (apt-get install -y chromium chromium-driver; set SITEGATE_REQUIRE_BROWSER=1 to fail instead)"
            );
        }
        return None;
    }
    Some(Browser::launch_with(extra).await)
}

/// One chromedriver process with one session.
pub struct Browser {
    driver: Child,
    port: u16,
    http: Client,
    session: String,
    _profile: tempfile::TempDir,
}

/// A found element.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver and a headless Chromium session. Panics with the
    /// driver's log when either does not come up.
    pub async fn launch() -> Browser {
        Browser::launch_with(&[]).await
    }

    /// [`Browser::launch`] with more Chromium flags.
    pub async fn launch_with(extra: &[String]) -> Browser {
        let (driver_bin, chromium) = binaries().expect("chromedriver and chromium installed");
        let profile = tempfile::tempdir().expect("temp dir for the browser profile");
        let port = super::free_port().port();
        let log = profile.path().join("chromedriver.log");
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", driver_bin.display()));
        let http = Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        let mut browser = Browser {
            driver,
            port,
            http,
            session: String::new(),
            _profile: profile,
        };
        browser.wait_until_up(&log).await;
        let data_dir = browser._profile.path().join("profile");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", data_dir.display()));
        args.extend(extra.iter().cloned());
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "timeouts": {"script": 20_000, "pageLoad": 30_000, "implicit": 0},
            "goog:loggingPrefs": {"browser": "SEVERE"},
        }}});
        let value = browser
            .raw(Method::POST, "/session", Some(caps))
            .await
            .unwrap_or_else(|e| panic!("new session: {e}\n{}", tail(&log)));
        browser.session = value["sessionId"]
            .as_str()
            .expect("sessionId in the new-session answer")
            .to_string();
        browser
    }

    async fn wait_until_up(&mut self, log: &Path) {
        for _ in 0..200 {
            if let Ok(v) = self.raw(Method::GET, "/status", None).await {
                if v["ready"] == json!(true) {
                    return;
                }
            }
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!("chromedriver exited with {status}\n{}", tail(log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not come up within 20 s\n{}", tail(log));
    }

    /// One WebDriver command; `Ok(value)` or `Err("error: message")`.
    async fn raw(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        let ok = resp.status().is_success();
        let v: Value = resp.json().await.map_err(|e| e.to_string())?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if ok {
            Ok(value)
        } else {
            Err(format!("{}: {}", value["error"], value["message"]))
        }
    }

    async fn cmd(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.raw(method, &format!("/session/{}{path}", self.session), body)
            .await
    }

    async fn must(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        self.cmd(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("webdriver {path}: {e}"))
    }

    pub async fn goto(&self, url: &str) {
        self.must(Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The first element matching a CSS selector, if any.
    pub async fn find(&self, css: &str) -> Option<Element> {
        let body = json!({"using": "css selector", "value": css});
        match self.cmd(Method::POST, "/element", Some(body)).await {
            Ok(v) => v[ELEMENT_KEY].as_str().map(|id| Element(id.to_string())),
            Err(e) if e.contains("no such element") => None,
            Err(e) => panic!("finding {css:?}: {e}"),
        }
    }

    /// The first element matching `css`; panics when there is none.
    pub async fn el(&self, css: &str) -> Element {
        self.find(css)
            .await
            .unwrap_or_else(|| panic!("no element matches {css:?}"))
    }

    pub async fn click(&self, css: &str) {
        let e = self.el(css).await;
        self.must(
            Method::POST,
            &format!("/element/{}/click", e.0),
            Some(json!({})),
        )
        .await;
    }

    /// Clears an input and types `text` into it.
    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.el(css).await;
        self.must(
            Method::POST,
            &format!("/element/{}/clear", e.0),
            Some(json!({})),
        )
        .await;
        self.must(
            Method::POST,
            &format!("/element/{}/value", e.0),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// The rendered text of the first element matching `css`. The page
    /// renders its lists again as values arrive: an element replaced between
    /// finding it and reading it ("stale element reference") is found again.
    pub async fn text(&self, css: &str) -> String {
        let mut tries = 0;
        loop {
            let e = self.el(css).await;
            let path = format!("/element/{}/text", e.0);
            match self.cmd(Method::GET, &path, None).await {
                Ok(v) => return v.as_str().unwrap_or_default().to_string(),
                Err(err) if err.contains("stale element reference") && tries < 5 => tries += 1,
                Err(err) => panic!("webdriver {path}: {err}"),
            }
        }
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) and returns its value.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.must(
            Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Runs `script` until it returns something other than null, false, 0 or
    /// "" and returns that; panics after `timeout` naming `what`, the page's
    /// alert and status lines and the steering state as shown.
    pub async fn wait_js(&self, what: &str, timeout: Duration, script: &str) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let v = self.js(script, json!([])).await;
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if tokio::time::Instant::now() >= deadline {
                let page = self
                    .js(
                        "return [document.getElementById('conn')?.textContent, \
                         document.getElementById('alert')?.textContent, \
                         document.getElementById('steer-note')?.textContent, \
                         document.getElementById('steer-form-msg')?.textContent, \
                         document.getElementById('steer-state')?.innerText, \
                         document.getElementById('chart-note')?.textContent, \
                         document.getElementById('chart-power')?.innerText, \
                         document.getElementById('chart-soc')?.innerText];",
                        json!([]),
                    )
                    .await;
                panic!("timed out after {timeout:?} waiting for {what}; page status: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// JavaScript errors logged by the page since the last call: uncaught
    /// exceptions and `console.error`. Failed requests are left out (the page
    /// gets 401 and 403 on purpose and shows them).
    pub async fn script_errors(&self) -> Vec<String> {
        let v = self
            .must(Method::POST, "/se/log", Some(json!({"type": "browser"})))
            .await;
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["message"].as_str())
            .filter(|m| !m.contains("Failed to load resource"))
            .map(str::to_string)
            .collect()
    }

    /// Sets the window's outer size in CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) {
        self.must(
            Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// Runs a Chrome DevTools Protocol command (chromedriver's extension).
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.must(
            Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
        .await
    }

    /// Lays the page out as a screen of `width` x `height` CSS pixels (a phone
    /// when `mobile`), whatever the window: headless windows have a minimum width.
    pub async fn emulate(&self, width: u32, height: u32, mobile: bool) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self.must(Method::GET, "/screenshot", None).await;
        decode_base64(v.as_str().expect("screenshot is a base64 string"))
    }

    /// Ends the session (Chromium exits) and chromedriver.
    pub async fn quit(mut self) {
        let _ = self.cmd(Method::DELETE, "", None).await;
        self.session.clear();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that panicked did not call quit: end the session with a plain
        // blocking request so that Chromium does not outlive the test.
        if !self.session.is_empty() {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let req = format!(
                    "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                    self.session
                );
                if s.write_all(req.as_bytes()).is_ok() {
                    let _ = s.read_to_end(&mut Vec::new());
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Standard base64 (with padding) to bytes; enough for WebDriver screenshots.
pub fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c:?}"),
        }
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= value(*c) << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
