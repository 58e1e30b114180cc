use evicortex::Namespace;
use evicortex_server::{ExportResponse, ServerConfig};
use serde_json::json;

use crate::harness::{Mode, TestServer, turn};

/// `Memory::export` of `namespace`: what `evicortex export --namespace NS` prints.
fn facade_export(server: &TestServer, namespace: &str) -> Vec<String> {
    let namespace = Namespace::new(namespace).expect("valid namespace");
    let mut out = Vec::new();
    server.state.memory().export(Some(&namespace), &mut out).expect("facade export");
    String::from_utf8(out).expect("utf-8").lines().map(str::to_owned).collect()
}

/// Appends `turns` to `namespace` with `key`, asserting a 200.
#[tokio::test]
async fn export_is_the_facades_export_of_the_namespace_alone() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let admin = server.admin_key();
    let mut special = turn("s0", 0, "line one\nline two \u{1F600} \"quoted\" \\ tab\t");
    special["speaker"] = json!("Alice");
    special["meta"] = json!({"source": "chat", "n": 1.5, "nested": {"a": [1, 2]}});
    special["time"] = json!("2024-05-02T10:00:00.123456-07:30");
    server.append("alice", &alice, vec![special]).await;
    server.append("bob", &bob, vec![turn("s0", 0, "bob's secret")]).await;
    // Past one chunk of the streamed body, interleaved with another namespace's turns.
    for batch in 0..3 {
        let turns = (0..100)
            .map(|i| {
                turn(
                    &format!("s{}", batch + 1),
                    i,
                    &format!("alice {batch}/{i} {}", "x".repeat(400)),
                )
            })
            .collect();
        server.append("alice", &alice, turns).await;
        server.append("bob", &bob, vec![turn("s1", batch, "bob again")]).await;
    }
    let erased = server.post("/v1/namespaces/alice/erase", &alice, &json!({"session": "s2"})).await;
    assert_eq!(erased.status, 200, "{}", erased.text);

    let reply = server.get("/v1/namespaces/alice/export", Some(&alice)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let lines = facade_export(&server, "alice");
    assert_eq!(lines.len(), 201, "the special turn, and sessions s1 and s3");
    assert_eq!(
        reply.text,
        format!(r#"{{"namespace":"alice","turns":[{}]}}"#, lines.join(",")),
        "each turn is a line of the facade's export, byte for byte, in its order"
    );
    let typed: ExportResponse = serde_json::from_str(&reply.text).expect("the documented shape");
    assert_eq!(typed.turns.len(), 201);
    assert_eq!(typed.turns[0].text, "line one\nline two \u{1F600} \"quoted\" \\ tab\t");
    assert_eq!(typed.turns[0].time, "2024-05-02T10:00:00.123456-07:30");
    assert_eq!(typed.turns[0].speaker.as_deref(), Some("Alice"));
    assert!(typed.turns.iter().all(|t| t.namespace == "alice" && t.session != "s2"));
    assert!(!reply.text.contains("bob"), "another namespace's turns leaked");

    let by_admin = server.get("/v1/namespaces/alice/export", Some(&admin)).await;
    assert_eq!((by_admin.status, &by_admin.text), (200, &reply.text));
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_namespace_exports_no_turns_as_its_stats_count_none() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let admin = server.admin_key();
    let carol = server.key_for("carol");
    server.append("alice", &admin, vec![turn("s", 0, "hello")]).await;
    for key in [&admin, &carol] {
        let stats = server.get("/v1/namespaces/carol/stats", Some(key)).await;
        assert_eq!((stats.status, &stats.body["turns"]), (200, &json!(0)), "{}", stats.text);
        let export = server.get("/v1/namespaces/carol/export", Some(key)).await;
        assert_eq!(export.status, 200, "{}", export.text);
        assert_eq!(export.body, json!({"namespace": "carol", "turns": []}));
    }
    let bad_name = server.get("/v1/namespaces/bad%2Fname/export", Some(&admin)).await;
    assert_eq!((bad_name.status, bad_name.body["field"].as_str()), (422, Some("namespace")));
    server.stop().await;
}

#[tokio::test]
async fn export_needs_a_key_for_the_namespace() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    server.append("bob", &bob, vec![turn("s", 0, "bob's secret")]).await;
    let anonymous = server.get("/v1/namespaces/bob/export", None).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
    let forbidden = server.get("/v1/namespaces/bob/export", Some(&alice)).await;
    let stats_refusal = server.get("/v1/namespaces/bob/stats", Some(&alice)).await;
    assert_eq!(forbidden.status, 403, "{}", forbidden.text);
    assert_eq!(forbidden.text, stats_refusal.text, "the same refusal as every namespace route");
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_has_not_read_the_export_does_not_hold_up_an_erasure_or_an_append() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let text = "y".repeat(2_000);
    for batch in 0..4u32 {
        let turns = (0..500).map(|i| turn(&format!("s{batch}"), i, &text)).collect();
        server.append("alice", &alice, turns).await;
    }
    server.append("bob", &bob, vec![turn("s", 0, "bob's turn")]).await;
    // Headers come with the first chunk; the body (about 4 MB) stays unread meanwhile.
    let response = server
        .client
        .get(format!("{}/v1/namespaces/alice/export", server.base))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("export starts");
    assert_eq!(response.status().as_u16(), 200);
    // An erasure checkpoints the write-ahead log, which waits for every open read snapshot: an
    // export reading at the client's pace would make it wait 30 s and fail.
    let erased = server.post("/v1/namespaces/bob/erase", &bob, &json!({"all": true})).await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    server.append("alice", &alice, vec![turn("later", 0, "after the export began")]).await;
    let body = response.text().await.expect("the whole body");
    let export: ExportResponse = serde_json::from_str(&body).expect("complete json");
    assert_eq!(export.turns.len(), 2_000, "the snapshot the export began with");
    server.stop().await;
}
