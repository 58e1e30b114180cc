//! A small W3C WebDriver client over HTTP, driving Debian's headless Chromium through
//! `chromedriver`. The protocol is JSON over HTTP, so the test's HTTP client speaks it directly.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key of an element reference in WebDriver responses.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A program on `PATH`, or a loud failure saying how to install it.
fn program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not on PATH: the inspector test needs Debian's chromium and \
                 chromium-driver packages (scripts/test installs them; by hand: \
                 apt-get install chromium chromium-driver)"
            )
        })
}

/// A running `chromedriver` with one headless Chromium session; both end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session with a
    /// fresh profile and a `width` x `height` window.
    pub async fn start(width: u32, height: u32) -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let driver = Command::new(program("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let client =
            reqwest::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = client.get(format!("{base}/status")).send().await;
            if let Ok(response) = ready {
                let body: Value = response.json().await.unwrap_or(Value::Null);
                if body["value"]["ready"] == true {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not become ready within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": program("chromium"), "args": args},
        }}});
        let mut browser =
            Browser { driver, base, session: String::new(), client, _profile: profile };
        let created = browser.call("POST", "/session", Some(capabilities)).await;
        browser.session =
            created["sessionId"].as_str().expect("a session id from chromedriver").to_owned();
        browser
    }

    /// One WebDriver command; panics with chromedriver's error on failure.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("chromedriver answers");
        let status = response.status();
        let body: Value = response.json().await.expect("chromedriver sends json");
        assert!(status.is_success(), "webdriver {path}: {status} {body}");
        body["value"].clone()
    }

    fn at(&self, command: &str) -> String {
        format!("/session/{}/{command}", self.session)
    }

    /// Navigates to `url` and waits for the page to load.
    pub async fn open(&self, url: &str) {
        self.call("POST", &self.at("url"), Some(json!({"url": url}))).await;
    }

    /// The element `css` selects (the first one).
    pub async fn find(&self, css: &str) -> String {
        let found = self
            .call("POST", &self.at("element"), Some(json!({"using": "css selector", "value": css})))
            .await;
        found[ELEMENT_KEY].as_str().unwrap_or_else(|| panic!("no element {css}")).to_owned()
    }

    /// Clears the field `css` selects and types `text` into it.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.call("POST", &self.at(&format!("element/{element}/clear")), Some(json!({}))).await;
        self.call(
            "POST",
            &self.at(&format!("element/{element}/value")),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Clicks the element `css` selects.
    pub async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.call("POST", &self.at(&format!("element/{element}/click")), Some(json!({}))).await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns its value.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        self.call("POST", &self.at("execute/sync"), Some(json!({"script": script, "args": args})))
            .await
    }

    /// The `textContent` of the element `css` selects ("" when there is none).
    pub async fn text(&self, css: &str) -> String {
        let value = self
            .script(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
                json!([css]),
            )
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until `script` returns true, failing after `seconds` with what `describe` returns.
    pub async fn wait_for(&self, script: &str, seconds: u64, describe: &str) {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            if self.script(script, json!([])).await == true {
                return;
            }
            if Instant::now() > deadline {
                let state = self.script(describe, json!([])).await;
                panic!("timed out after {seconds} s waiting for `{script}`; page: {state}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a PNG screenshot of the viewport to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self.call("GET", &self.at("screenshot"), None).await;
        let png = decode_base64(encoded.as_str().expect("base64 screenshot"));
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
        fs_err::write(path, png).expect("write the screenshot");
    }

    /// Closes the session (Chromium exits); chromedriver stops on drop.
    pub async fn close(mut self) {
        self.call("DELETE", &format!("/session/{}", self.session), None).await;
        self.session.clear();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Best effort: a panicking test must not leave processes behind.
        self.driver.kill().ok();
        self.driver.wait().ok();
    }
}

/// Standard base64 (with padding), as WebDriver sends screenshots.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c:#x}"),
        }
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut word = 0u32;
        for (i, &c) in data.iter().enumerate() {
            word |= value(c) << (18 - 6 * i);
        }
        for i in 0..data.len().saturating_sub(1) {
            out.push((word >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes_padded_text() {
    assert_eq!(decode_base64("TWFu"), b"Man");
    assert_eq!(decode_base64("TWE="), b"Ma");
    assert_eq!(decode_base64("TQ=="), b"M");
    assert_eq!(decode_base64("iVBORw0K"), b"\x89PNG\r\n");
}
