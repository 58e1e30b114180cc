//! A real server on loopback over a temporary store.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use evicortex::{Encoder, Memory, Namespace, Overlength};
use evicortex_server::{AppState, KeyScope, KeyStore, ServerConfig, serve_http};
use serde_json::{Value, json};

/// A running server and what a test needs to talk to it.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub state: AppState,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// The status and JSON body of a response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

impl TestServer {
    /// Starts a server with default limits.
    pub async fn start() -> TestServer {
        TestServer::start_with(ServerConfig::default()).await
    }

    /// Starts a server with `config` and hybrid retrieval.
    pub async fn start_with(config: ServerConfig) -> TestServer {
        TestServer::start_in_mode(config, Mode::Hybrid).await
    }

    /// Starts a server with `config` and the given retrieval.
    pub async fn start_in_mode(config: ServerConfig, mode: Mode) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = state_in_mode(dir.path(), config, mode);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let served = state.clone();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                // A dropped sender also means: shut down.
                rx.await.ok();
            };
            serve_http(listener, served, shutdown, Duration::from_secs(30))
                .await
                .expect("server ran cleanly");
        });
        let client =
            reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        TestServer { base, client, state, shutdown: Some(tx), task: Some(task), _dir: dir }
    }

    /// A new key for `namespace`.
    pub fn key_for(&self, namespace: &str) -> String {
        let ns = Namespace::new(namespace).expect("valid namespace");
        self.state.keys().create(&KeyScope::Namespace(ns)).expect("create key").secret
    }

    /// Appends `turns` to `namespace` with `key`; panics unless they are stored.
    pub async fn append(&self, namespace: &str, key: &str, turns: Vec<Value>) -> Reply {
        let path = format!("/v1/namespaces/{namespace}/turns");
        let reply = self.post(&path, key, &json!({ "turns": turns })).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply
    }

    /// Keys for `alice` and for `bob`, once bob's namespace holds one turn saying `text`; and
    /// the reply to that append.
    pub async fn bob_holding(&self, text: &str) -> (String, String, Reply) {
        let (alice, bob) = (self.key_for("alice"), self.key_for("bob"));
        let stored = self.append("bob", &bob, vec![turn("s", 0, text)]).await;
        (alice, bob, stored)
    }

    /// A new admin key.
    pub fn admin_key(&self) -> String {
        self.state.keys().create(&KeyScope::Admin).expect("create key").secret
    }

    /// Sends `method path` with an optional bearer key and an optional raw body.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        let response = request.send().await.expect("request reaches the server");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, body, text }
    }

    /// POSTs `body` as JSON.
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> Reply {
        self.send("POST", path, Some(key), Some(serde_json::to_vec(body).expect("json"))).await
    }

    /// GETs `path`.
    pub async fn get(&self, path: &str, key: Option<&str>) -> Reply {
        self.send("GET", path, key, None).await
    }

    /// Waits until every turn appended so far is embedded (the server embeds in the background).
    pub fn wait_embedded(&self) {
        assert!(
            self.state.memory().wait_for_embedding(Duration::from_secs(120)),
            "the background embedder did not catch up within 120 s"
        );
    }

    /// Stops accepting, drains, and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            tx.send(()).ok();
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
    }
}

/// The pinned encoder, loaded once per test process. Fails (never skips) when it is not
/// installed.
pub fn encoder() -> Arc<dyn Encoder> {
    static ENCODER: OnceLock<Arc<dyn Encoder>> = OnceLock::new();
    let encoder = ENCODER.get_or_init(|| {
        evicortex::load_pinned_encoder(Overlength::Refuse).unwrap_or_else(|e| {
            panic!("the pinned encoder is needed: run `evicortex model fetch` first ({e})")
        })
    });
    Arc::clone(encoder)
}

/// How a test server retrieves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// BM25 plus dense under the pinned encoder, appended turns embedded in the background
    /// (what `evicortex serve` runs by default).
    Hybrid,
    /// BM25 only (`evicortex serve --lexical-only`).
    LexicalOnly,
}

/// Server state over a fresh store in `dir`, with hybrid (BM25 + dense) retrieval.
pub fn state_in(dir: &std::path::Path, config: ServerConfig) -> AppState {
    state_in_mode(dir, config, Mode::Hybrid)
}

/// Server state over a fresh store in `dir`.
pub fn state_in_mode(dir: &std::path::Path, config: ServerConfig, mode: Mode) -> AppState {
    let mut builder = Memory::builder(dir.join("store"));
    if mode == Mode::Hybrid {
        builder.encoder(encoder()).background_embedding();
    }
    let memory = builder.open().expect("open store");
    let keys = KeyStore::open(&dir.join("store")).expect("open key store");
    AppState::new(Arc::new(memory), keys, config)
}

/// A valid turn object (without namespace).
pub fn turn(session: &str, index: u32, text: &str) -> Value {
    json!({
        "session": session,
        "turn": index,
        "role": if index.is_multiple_of(2) { "user" } else { "assistant" },
        "text": text,
        "time": format!("2024-05-{:02}T10:{:02}:00+01:00", index % 28 + 1, index % 60),
    })
}
