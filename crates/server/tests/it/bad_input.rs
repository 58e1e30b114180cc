use evicortex_server::ServerConfig;
use serde_json::json;

use crate::harness::{TestServer, turn};

#[track_caller]
fn assert_refused(reply: &crate::harness::Reply, status: u16, field: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.body["field"].as_str(), field, "{}", reply.text);
    assert!(reply.body["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", reply.text);
}

#[tokio::test]
async fn malformed_and_invalid_bodies_name_the_field() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let path = "/v1/namespaces/alice/turns";
    let raw = |body: &str| server.send("POST", path, Some(&key), Some(body.as_bytes().to_vec()));

    assert_refused(&raw("{\"turns\": [").await, 400, Some("turns"));
    assert_refused(&raw("").await, 400, None);
    assert_refused(&raw("not json").await, 400, None);
    assert_refused(&raw("{\"turns\": []} {}").await, 400, None);
    assert_refused(&raw("[1, 2]").await, 422, Some("body"));
    assert_refused(&raw("{}").await, 422, Some("turns"));
    assert_refused(&raw("{\"turns\": [], \"extra\": 1}").await, 422, Some("extra"));
    assert_refused(&raw("{\"turns\": []}").await, 422, Some("turns"));
    assert_refused(&raw("{\"turns\": [1]}").await, 422, Some("turns[0]"));

    let mut bad_time = turn("s", 1, "b");
    bad_time["time"] = json!("2024-05-02 10:00");
    let reply = server.post(path, &key, &json!({"turns": [turn("s", 0, "a"), bad_time]})).await;
    assert_refused(&reply, 422, Some("turns[1].time"));

    // One field of a good turn missing, wrong or unknown: the refusal names it.
    for (name, value) in [
        ("text", None),
        ("role", Some(json!("robot"))),
        ("namespace", Some(json!("alice"))),
        ("speeker", Some(json!("Ann"))),
    ] {
        let mut changed = turn("s", 0, "a");
        match value {
            Some(value) => changed[name] = value,
            None => {
                changed.as_object_mut().expect("object").remove(name);
            }
        }
        assert_refused(
            &server.post(path, &key, &json!({"turns": [changed]})).await,
            422,
            Some(&format!("turns[0].{name}")),
        );
    }

    let stats = server.get("/v1/namespaces/alice/stats", Some(&key)).await;
    assert_eq!(stats.body["turns"], 0, "a refused batch stores nothing: {}", stats.text);
    server.stop().await;
}

/// B4 over HTTP: what the ledger would store changed is refused, as in the JSONL format.
#[tokio::test]
async fn input_that_would_be_stored_changed_is_refused() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let path = "/v1/namespaces/alice/turns";
    let good = turn("s", 0, "a").to_string();
    let with = |replacement: &str| good.replacen("\"text\"", replacement, 1);
    let raw = |body: String| server.send("POST", path, Some(&key), Some(body.into_bytes()));

    let reply = raw(format!(r#"{{"turns":[{}]}}"#, with(r#""meta":{"a":1,"a":2},"text""#))).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert!(reply.text.contains("duplicate field `a`"), "{}", reply.text);
    let reply = raw(format!(
        r#"{{"turns":[{}]}}"#,
        with(r#""meta":{"n":123456789012345678901234567890},"text""#)
    ))
    .await;
    assert_refused(&reply, 422, Some("turns[0].meta.n"));
    for time in ["2016-12-31T23:59:60Z", "2024-01-01T00:00:00-00:00"] {
        let mut t = turn("s", 0, "a");
        t["time"] = json!(time);
        assert_refused(
            &server.post(path, &key, &json!({"turns": [t]})).await,
            422,
            Some("turns[0].time"),
        );
    }
    let stats = server.get("/v1/namespaces/alice/stats", Some(&key)).await;
    assert_eq!(stats.body["turns"], 0, "{}", stats.text);
    server.stop().await;
}

#[tokio::test]
async fn oversized_bodies_get_413_and_too_many_turns_get_422() {
    let server = TestServer::start_with(ServerConfig {
        body_limit_bytes: 4096,
        max_turns_per_request: 3,
        ..ServerConfig::default()
    })
    .await;
    let key = server.key_for("alice");
    let big = json!({"turns": [turn("s", 0, &"x".repeat(10_000))]});
    let reply = server.post("/v1/namespaces/alice/turns", &key, &big).await;
    assert_refused(&reply, 413, None);
    let many = json!({"turns": (0..4).map(|i| turn("s", i, "t")).collect::<Vec<_>>()});
    assert_refused(
        &server.post("/v1/namespaces/alice/turns", &key, &many).await,
        422,
        Some("turns"),
    );
    let ok = json!({"turns": (0..3).map(|i| turn("s", i, "t")).collect::<Vec<_>>()});
    assert_eq!(server.post("/v1/namespaces/alice/turns", &key, &ok).await.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn conflicting_turns_get_409_and_identical_retries_are_no_ops() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let path = "/v1/namespaces/alice/turns";
    let first = server.post(path, &key, &json!({"turns": [turn("s", 0, "original")]})).await;
    assert_eq!((first.status, first.body["appended"].as_u64()), (200, Some(1)), "{}", first.text);
    let retry = server.post(path, &key, &json!({"turns": [turn("s", 0, "original")]})).await;
    assert_eq!(
        (retry.status, retry.body["already_present"].as_u64()),
        (200, Some(1)),
        "{}",
        retry.text
    );
    assert_eq!(retry.body["turns"][0]["id"], first.body["turns"][0]["id"]);
    let changed = server
        .post(path, &key, &json!({"turns": [turn("s", 1, "new"), turn("s", 0, "rewritten")]}))
        .await;
    assert_refused(&changed, 409, Some("turns[1].text"));
    let stats = server.get("/v1/namespaces/alice/stats", Some(&key)).await;
    assert_eq!(stats.body["turns"], 1, "the refused batch stored nothing: {}", stats.text);
    server.stop().await;
}

#[tokio::test]
async fn erase_bodies_must_name_exactly_one_target() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let path = "/v1/namespaces/alice/erase";
    assert_refused(&server.post(path, &key, &json!({})).await, 422, Some("body"));
    assert_refused(
        &server.post(path, &key, &json!({"session": "s", "all": true})).await,
        422,
        Some("body"),
    );
    assert_refused(&server.post(path, &key, &json!({"all": false})).await, 422, Some("all"));
    assert_refused(&server.post(path, &key, &json!({"record": -1})).await, 422, Some("record"));
    assert_refused(&server.post(path, &key, &json!({"session": ""})).await, 422, Some("session"));
    assert_refused(&server.post(path, &key, &json!({"session": "never"})).await, 404, None);
    server.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_errors() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let missing = server.get("/v2/nothing", Some(&key)).await;
    assert_refused(&missing, 404, None);
    let wrong_method = server.send("DELETE", "/v1/namespaces/alice/turns", Some(&key), None).await;
    assert_refused(&wrong_method, 405, None);
    server.stop().await;
}
