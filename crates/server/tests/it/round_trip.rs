use evicortex::Namespace;
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
    let appended = server.append("alice", &key, turns).await;
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
    let (alice, bob, stored) = server.bob_holding("bob's").await;
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

#[tokio::test]
async fn compile_cites_within_budget_respects_as_of_and_forgets_erased_text() {
    let server = TestServer::start().await;
    let key = server.key_for("alice");
    let turns = json!({"turns": [
        {"session": "may", "turn": 0, "role": "user", "text": "I moved to Lisbon in May for a new job.", "time": "2024-05-02T10:00:00+01:00"},
        {"session": "may", "turn": 1, "role": "assistant", "text": "Congratulations on the move to Lisbon!", "time": "2024-05-02T10:00:09+01:00"},
        {"session": "june", "turn": 0, "role": "user", "text": "My cat Tom has a vet appointment on Friday.", "time": "2024-06-10T08:00:00Z"},
        {"session": "july", "turn": 0, "role": "user", "text": "I started learning the cello.", "time": "2024-07-01T18:00:00Z"}
    ]});
    assert_eq!(server.post("/v1/namespaces/alice/turns", &key, &turns).await.status, 200);
    server.wait_embedded();

    let ask = |query: &str, budget: u32, extra: serde_json::Value| {
        let mut body = json!({"query": query, "budget": budget, "reader_tokenizer": "o200k_base"});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let context = server
        .post("/v1/namespaces/alice/compile", &key, &ask("Where did I move?", 200, json!({})))
        .await;
    assert_eq!(context.status, 200, "{}", context.text);
    assert_eq!(context.body["format"], "evicortex-compiled-context-2");
    assert!(context.body["text"].as_str().expect("text").contains("Lisbon"), "{}", context.text);
    assert!(context.body["tokens_used"].as_u64().expect("tokens") <= 200);
    assert_eq!(context.body["config"]["dense"]["mode"], "on", "{}", context.text);
    assert!(context.body["encoder"].is_object(), "{}", context.text);

    let before_july = server
        .post(
            "/v1/namespaces/alice/compile",
            &key,
            &ask("What instrument am I learning?", 200, json!({"as_of": "2024-06-30T00:00:00Z"})),
        )
        .await;
    assert_eq!(before_july.status, 200, "{}", before_july.text);
    assert!(
        !before_july.body["text"].as_str().expect("text").contains("cello"),
        "{}",
        before_july.text
    );

    // Options are partial: the settings given replace the server's default, the rest stay.
    let options = json!({"dense": {"mode": "off"}, "abstention": {"signal": "lexical_coverage"}});
    let lexical_only = server
        .post(
            "/v1/namespaces/alice/compile",
            &key,
            &ask("cat vet", 200, json!({"options": options})),
        )
        .await;
    assert_eq!(lexical_only.status, 200, "{}", lexical_only.text);
    assert_eq!(lexical_only.body["config"]["dense"]["mode"], "off");
    assert_eq!(
        lexical_only.body["config"]["lexical"]["top_n"],
        evicortex::DEFAULT_TOP_N,
        "{}",
        lexical_only.text
    );
    assert!(
        lexical_only.body["text"].as_str().expect("text").contains("Tom"),
        "{}",
        lexical_only.text
    );

    for (options, field) in [
        (json!({"rrf_k": -1.0}), "options.rrf_k"),
        (json!({"rrf_k": 5.0, "bogus": 1}), "options.bogus"),
        (json!({"lexical": {"top_k": 3}}), "options.lexical.top_k"),
        (json!({"lexical": {"top_n": "ten"}}), "options.lexical.top_n"),
    ] {
        let refused = server
            .post(
                "/v1/namespaces/alice/compile",
                &key,
                &ask("cat", 200, json!({"options": options})),
            )
            .await;
        assert_eq!(
            (refused.status, refused.body["field"].as_str()),
            (422, Some(field)),
            "{}",
            refused.text
        );
    }
    let unknown = server
        .post(
            "/v1/namespaces/alice/compile",
            &key,
            &ask("cat", 200, json!({"reader_tokenizer": "/etc/passwd.json"})),
        )
        .await;
    assert_eq!(
        (unknown.status, unknown.body["field"].as_str()),
        (422, Some("reader_tokenizer")),
        "{}",
        unknown.text
    );
    let empty = server.post("/v1/namespaces/alice/compile", &key, &ask(" ", 200, json!({}))).await;
    assert_eq!(
        (empty.status, empty.body["field"].as_str()),
        (422, Some("query")),
        "{}",
        empty.text
    );

    let erased = server.post("/v1/namespaces/alice/erase", &key, &json!({"session": "may"})).await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    let after = server
        .post(
            "/v1/namespaces/alice/compile",
            &key,
            &ask("Where did I move? Lisbon", 400, json!({})),
        )
        .await;
    assert_eq!(after.status, 200, "{}", after.text);
    assert!(!after.text.contains("Lisbon job"), "{}", after.text);
    assert!(
        !after.body["text"].as_str().expect("text").contains("Lisbon"),
        "erased text compiled: {}",
        after.text
    );
    server.stop().await;
}
