//! Random method, path, key and body sent to the router in-process (`tower::ServiceExt::oneshot`):
//! no request may panic a handler, get a 5xx, or get an error that is not `{error, field}` JSON.

use axum::body::Body;
use axum::http::Request;
use evicortex_server::{AppState, ServerConfig, router};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::harness::{state_in, turn};

#[derive(Debug, Clone)]
enum Auth {
    None,
    Own,
    Admin,
    Garbage(String),
}

fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("turns".to_owned()),
        Just("session".to_owned()),
        Just("turn".to_owned()),
        Just("role".to_owned()),
        Just("text".to_owned()),
        Just("time".to_owned()),
        Just("meta".to_owned()),
        Just("speaker".to_owned()),
        Just("namespace".to_owned()),
        Just("query".to_owned()),
        Just("budget".to_owned()),
        Just("reader_tokenizer".to_owned()),
        Just("as_of".to_owned()),
        Just("options".to_owned()),
        Just("record".to_owned()),
        Just("all".to_owned()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::from),
        Just(Value::from("user")),
        Just(Value::from("2024-05-02T10:00:00+01:00")),
        Just(Value::from("o200k_base")),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid body of `route` with one field replaced by random JSON, so that validation deep inside
/// the handlers is reached.
fn mutated_body() -> impl Strategy<Value = Vec<u8>> {
    let valid = prop_oneof![
        Just(json!({"turns": [turn("s", 0, "hello"), turn("s", 1, "world")]})),
        Just(json!({"query": "where?", "budget": 64, "reader_tokenizer": "o200k_base"})),
        Just(json!({"session": "s"})),
        Just(json!({"record": 0})),
    ];
    let pointer = prop_oneof![
        Just("/turns"),
        Just("/turns/0"),
        Just("/turns/0/session"),
        Just("/turns/0/turn"),
        Just("/turns/0/role"),
        Just("/turns/0/text"),
        Just("/turns/0/time"),
        Just("/turns/1/meta"),
        Just("/turns/1/speaker"),
        Just("/query"),
        Just("/budget"),
        Just("/reader_tokenizer"),
        Just("/as_of"),
        Just("/options"),
        Just("/session"),
        Just("/record"),
    ];
    (valid, pointer, arb_json()).prop_map(|(mut body, pointer, replacement)| {
        if let Some(slot) = body.pointer_mut(pointer) {
            *slot = replacement;
        }
        serde_json::to_vec(&body).expect("json")
    })
}

fn arb_body() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        2 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Some),
        3 => arb_json().prop_map(|v| Some(serde_json::to_vec(&v).expect("json"))),
        4 => mutated_body().prop_map(Some),
    ]
}

fn arb_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("alice".to_owned()),
        Just("bob".to_owned()),
        "[a-zA-Z0-9._:@-]{0,12}",
        // Arbitrary text, percent-encoded byte by byte (may decode to invalid UTF-8 when
        // mixed with raw escapes).
        prop::collection::vec(any::<u8>(), 0..12)
            .prop_map(|bytes| bytes.iter().map(|b| format!("%{b:02X}")).collect()),
        Just("%".to_owned()),
        Just("%zz".to_owned()),
    ]
}

fn arb_path() -> impl Strategy<Value = String> {
    let route = prop_oneof![
        Just("turns".to_owned()),
        Just("compile".to_owned()),
        Just("erase".to_owned()),
        Just("stats".to_owned()),
        "[a-z]{0,6}",
    ];
    prop_oneof![
        4 => (arb_segment(), route).prop_map(|(ns, route)| format!("/v1/namespaces/{ns}/{route}")),
        1 => Just("/healthz".to_owned()),
        1 => Just("/openapi.json".to_owned()),
        1 => Just("/v1/verify".to_owned()),
        1 => "(/[a-z0-9%]{0,8}){0,4}",
    ]
}

fn arb_auth() -> impl Strategy<Value = Auth> {
    prop_oneof![
        1 => Just(Auth::None),
        4 => Just(Auth::Own),
        1 => Just(Auth::Admin),
        1 => "[ -~]{0,40}".prop_map(Auth::Garbage),
    ]
}

fn arb_method() -> impl Strategy<Value = &'static str> {
    prop_oneof![3 => Just("POST"), 2 => Just("GET"), 1 => Just("PUT"), 1 => Just("DELETE"), 1 => Just("PATCH")]
}

struct Fixture {
    state: AppState,
    own: String,
    admin: String,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

#[test]
fn random_requests_never_panic_nor_get_5xx() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = state_in(
        dir.path(),
        ServerConfig {
            body_limit_bytes: 64 * 1024,
            max_turns_per_request: 100,
            ..ServerConfig::default()
        },
    );
    let own = state
        .keys()
        .create(&evicortex_server::KeyScope::Namespace(
            evicortex::Namespace::new("alice").expect("ns"),
        ))
        .expect("key")
        .secret;
    let admin = state.keys().create(&evicortex_server::KeyScope::Admin).expect("key").secret;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let fixture = Fixture { state, own, admin, runtime, _dir: dir };

    let config = ProptestConfig { cases: 768, max_shrink_iters: 256, ..ProptestConfig::default() };
    proptest!(config, |(method in arb_method(), path in arb_path(), auth in arb_auth(), body in arb_body())| {
        let mut request = Request::builder().method(method).uri(&path);
        match &auth {
            Auth::None => {}
            Auth::Own => request = request.header("authorization", format!("Bearer {}", fixture.own)),
            Auth::Admin => request = request.header("authorization", format!("Bearer {}", fixture.admin)),
            Auth::Garbage(value) => request = request.header("authorization", value.as_str()),
        }
        // Paths the http crate itself refuses (e.g. empty) never reach a server.
        let request = request.body(body.map_or_else(Body::empty, Body::from));
        prop_assume!(request.is_ok());
        let request = request.expect("checked above");
        let app = router(fixture.state.clone());
        let (status, bytes) = fixture.runtime.block_on(async move {
            let response = app.oneshot(request).await.expect("infallible");
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
            (status, bytes)
        });
        let text = String::from_utf8_lossy(&bytes);
        prop_assert!(!status.is_server_error(), "{method} {path} ({auth:?}) -> {status}: {text}");
        if !status.is_success() {
            let error: Value = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{method} {path} -> {status}: non-JSON error {text:?}: {e}")))?;
            prop_assert!(error["error"].is_string(), "{method} {path} -> {status}: {text}");
            prop_assert!(error.get("field").is_some(), "{method} {path} -> {status}: {text}");
        }
    });
}
