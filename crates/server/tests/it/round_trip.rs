use evicortex_core::Namespace;
use serde_json::json;

use crate::harness::{TestServer, turn};

#[tokio::test]
async fn append_stats_erase_verify() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let admin = server.admin_key();
    let turns: Vec<_> = (0..4)
        .map(|i| turn("s1", i, &format!("alice turn {i}")))
        .chain([turn("s2", 0, "other session")])
        .collect();
    let appended =
        server.post("/v1/namespaces/alice/turns", &key, &json!({ "turns": turns })).await;
    assert_eq!(appended.status, 200, "{}", appended.text);
    assert_eq!(appended.body["appended"], 5);
    let ids: Vec<u64> = appended.body["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["id"].as_u64().expect("id"))
        .collect();
    assert_eq!(ids.len(), 5);
    assert!(appended.body["turns"][0]["digest"].as_str().is_some_and(|d| d.len() == 64));

    let stats = server.get("/v1/namespaces/alice/stats", Some(&key)).await;
    assert_eq!(
        (stats.body["turns"].as_u64(), stats.body["sessions"].as_u64()),
        (Some(5), Some(2)),
        "{}",
        stats.text
    );

    let erased = server.post("/v1/namespaces/alice/erase", &key, &json!({"record": ids[1]})).await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    assert_eq!(erased.body["erased"], json!([ids[1]]));
    let again = server.post("/v1/namespaces/alice/erase", &key, &json!({"record": ids[1]})).await;
    assert_eq!(
        (again.status, again.body["already_erased"].as_u64()),
        (200, Some(1)),
        "{}",
        again.text
    );
    let session = server.post("/v1/namespaces/alice/erase", &key, &json!({"session": "s1"})).await;
    assert_eq!(session.body["erased"].as_array().map(Vec::len), Some(3), "{}", session.text);

    let memory = server.state.memory();
    let left = memory.evidence(&Namespace::new("alice").expect("ns")).expect("evidence");
    assert_eq!(left.iter().map(|e| e.turn.text.as_str()).collect::<Vec<_>>(), ["other session"]);

    let all = server.post("/v1/namespaces/alice/erase", &key, &json!({"all": true})).await;
    assert_eq!(all.status, 200, "{}", all.text);
    let verified = server.get("/v1/verify", Some(&admin)).await;
    assert_eq!(
        (verified.status, verified.body["turns"].as_u64()),
        (200, Some(0)),
        "{}",
        verified.text
    );
    assert_eq!(verified.body["erased_turns"], 5);
    server.stop().await;
}

#[tokio::test]
async fn erasing_another_namespaces_record_looks_like_erasing_nothing() {
    let server = TestServer::start().await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let stored = server
        .post("/v1/namespaces/bob/turns", &bob, &json!({"turns": [turn("s", 0, "bob's")]}))
        .await;
    let bob_record = stored.body["turns"][0]["id"].as_u64().expect("id");
    let other =
        server.post("/v1/namespaces/alice/erase", &alice, &json!({"record": bob_record})).await;
    let absent = server
        .post("/v1/namespaces/alice/erase", &alice, &json!({"record": bob_record + 1000}))
        .await;
    assert_eq!((other.status, absent.status), (404, 404), "{} / {}", other.text, absent.text);
    let normalise = |text: &str, id: u64| text.replace(&id.to_string(), "N");
    assert_eq!(normalise(&other.text, bob_record), normalise(&absent.text, bob_record + 1000));
    let still = server.get("/v1/namespaces/bob/stats", Some(&bob)).await;
    assert_eq!(still.body["turns"], 1);
    server.stop().await;
}
