//! `POST /v1/namespaces/{ns}/answer` and the served reader at `/v1/chat/completions`, on a real
//! server on loopback with the real smallest reader (a few tokens decoded).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use evicortex::{LocalGgufReader, Memory, Reader, ReaderModelError};
use evicortex_server::{AnswerReader, AppState, KeyStore, ServerConfig, serve_http};
use serde_json::json;

use crate::harness::{Mode, TestServer, turn};

const TEST_READER: &str = "smollm2-135m-instruct-q4_1";

pub(crate) fn reader() -> Arc<LocalGgufReader> {
    static READER: OnceLock<Arc<LocalGgufReader>> = OnceLock::new();
    READER
        .get_or_init(|| match LocalGgufReader::load_pinned(TEST_READER) {
            Ok(reader) => Arc::new(reader),
            Err(err @ ReaderModelError::ModelMissing { .. }) => panic!(
                "{err}\nthis test needs the pinned reader: run `evicortex model fetch \
                 {TEST_READER}` (scripts/test does)"
            ),
            Err(err) => panic!("loading {TEST_READER}: {err}"),
        })
        .clone()
}

/// A lexical-only server answering with the test reader.
async fn start_with_reader() -> (String, reqwest::Client, AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::builder(dir.path().join("store")).open().unwrap();
    let keys = KeyStore::open(&dir.path().join("store")).unwrap();
    let answer_reader = AnswerReader { reader: reader(), tokenizer: None };
    let state =
        AppState::new_with_reader(Arc::new(memory), keys, ServerConfig::default(), answer_reader);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = state.clone();
    tokio::spawn(async move {
        serve_http(listener, served, std::future::pending(), Duration::from_secs(5)).await.unwrap();
    });
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    (base, client, state, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_with_citations_under_the_compile_key_rules() {
    let (base, client, state, _dir) = start_with_reader().await;
    let ns = evicortex::Namespace::new("alice").unwrap();
    let alice = state.keys().create(&evicortex_server::KeyScope::Namespace(ns)).unwrap().secret;
    let bob = state
        .keys()
        .create(&evicortex_server::KeyScope::Namespace(evicortex::Namespace::new("bob").unwrap()))
        .unwrap()
        .secret;
    let admin = state.keys().create(&evicortex_server::KeyScope::Admin).unwrap().secret;
    let post = |path: String, key: Option<String>, body: serde_json::Value| {
        let mut request = client.post(format!("{base}{path}")).json(&body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let turns = json!({"turns": [turn("s1", 0, "I moved to Lisbon in May.")]});
    assert_eq!(post("/v1/namespaces/alice/turns".into(), Some(alice.clone()), turns).await.0, 200);

    let ask = json!({"query": "Where did I move?", "budget": 200, "max_new_tokens": 6});
    let (status, body) =
        post("/v1/namespaces/alice/answer".into(), Some(alice.clone()), ask.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["answer"]["reader"]["name"], TEST_READER, "{body}");
    assert!(body["answer"]["prompt_tokens"].as_u64().unwrap() > 40, "{body}");
    assert!(body["answer"]["generated_tokens"].as_u64().unwrap() <= 6, "{body}");
    assert!(body["context"]["text"].as_str().unwrap().contains("Lisbon"), "{body}");
    assert_eq!(
        body["context"]["reader_tokenizer"].as_str(),
        Some(evicortex::ReaderTokenizer::name(reader().tokenizer().as_ref())),
    );

    // The compile key rules: no key 401, another namespace's key 403 (and the same 403 for a
    // namespace that does not exist).
    assert_eq!(post("/v1/namespaces/alice/answer".into(), None, ask.clone()).await.0, 401);
    assert_eq!(
        post("/v1/namespaces/alice/answer".into(), Some(bob.clone()), ask.clone()).await.0,
        403
    );
    assert_eq!(
        post("/v1/namespaces/zed/answer".into(), Some(bob.clone()), ask.clone()).await.0,
        403
    );

    // A budget over the reader's window is refused with the numbers, on `budget`.
    let window = reader().context_window().unwrap();
    let (status, body) = post(
        "/v1/namespaces/alice/answer".into(),
        Some(alice.clone()),
        json!({"query": "Where did I move?", "budget": window}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "budget", "{body}");
    assert!(body["error"].as_str().unwrap().contains(&window.to_string()), "{body}");
    let (status, body) = post(
        "/v1/namespaces/alice/answer".into(),
        Some(alice.clone()),
        json!({"query": "q", "budget": 100, "max_new_tokens": 0}),
    )
    .await;
    assert_eq!((status, body["field"].as_str()), (422, Some("max_new_tokens")), "{body}");

    // The served reader: admin keys only.
    let chat = json!({"model": TEST_READER, "max_tokens": 3,
                      "messages": [{"role": "user", "content": "Say hi."}]});
    assert_eq!(post("/v1/chat/completions".into(), Some(alice.clone()), chat.clone()).await.0, 403);
    assert_eq!(post("/v1/chat/completions".into(), None, chat.clone()).await.0, 401);
    let (status, body) = post("/v1/chat/completions".into(), Some(admin), chat).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["usage"]["completion_tokens"].as_u64().unwrap() <= 3, "{body}");
}

#[tokio::test]
async fn a_server_without_a_reader_says_so() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let key = server.key_for("alice");
    let reply = server
        .post("/v1/namespaces/alice/answer", &key, &json!({"query": "q", "budget": 100}))
        .await;
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert!(reply.text.contains("--reader"), "{}", reply.text);
    let admin = server.admin_key();
    let reply = server.post("/v1/chat/completions", &admin, &json!({})).await;
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert!(
        reply.text.contains("\"no_reader\"") && reply.text.contains("--reader"),
        "{}",
        reply.text
    );
    server.stop().await;
}
