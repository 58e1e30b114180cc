use serde_json::json;

use crate::harness::{TestServer, turn};

#[tokio::test]
async fn requests_without_a_valid_key_get_401() {
    let server = TestServer::start().await;
    let body = json!({"turns": [turn("s", 0, "hello")]});
    let bytes = serde_json::to_vec(&body).expect("json");
    for key in [None, Some("evk_0000"), Some("")] {
        let reply =
            server.send("POST", "/v1/namespaces/alice/turns", key, Some(bytes.clone())).await;
        assert_eq!(reply.status, 401, "{key:?}: {}", reply.text);
        assert!(
            reply.body["error"].as_str().is_some_and(|e| e.contains("api key")),
            "{}",
            reply.text
        );
    }
    let basic = server
        .client
        .get(format!("{}/v1/namespaces/alice/stats", server.base))
        .header("authorization", "Basic YWxpY2U6cHc=")
        .send()
        .await
        .expect("request");
    assert_eq!(basic.status().as_u16(), 401);
    assert_eq!(basic.headers()["www-authenticate"], "Bearer");
    server.stop().await;
}

#[tokio::test]
async fn a_key_for_another_namespace_gets_the_same_403_whether_it_exists_or_not() {
    let server = TestServer::start().await;
    let (alice, bob, _) = server.bob_holding("bob's secret").await;

    let mut replies = Vec::new();
    for ns in ["bob", "nobody-here", "bad%2Fname", "%FF"] {
        for (method, route, body) in [
            ("GET", "stats", None),
            ("GET", "export", None),
            ("POST", "turns", Some(json!({"turns": [turn("s", 1, "x")]}))),
            ("POST", "erase", Some(json!({"all": true}))),
            (
                "POST",
                "compile",
                Some(json!({"query": "secret", "budget": 100, "reader_tokenizer": "o200k_base"})),
            ),
        ] {
            let bytes = body.map(|b| serde_json::to_vec(&b).expect("json"));
            let reply = server
                .send(method, &format!("/v1/namespaces/{ns}/{route}"), Some(&alice), bytes)
                .await;
            assert_eq!(reply.status, 403, "{ns} {route}: {}", reply.text);
            assert!(!reply.text.contains("bob"), "{}", reply.text);
            replies.push(reply.text);
        }
    }
    replies.dedup();
    assert_eq!(replies.len(), 1, "every refusal is byte-identical: {replies:?}");

    let still = server.get("/v1/namespaces/bob/stats", Some(&bob)).await;
    assert_eq!(still.body["turns"], 1, "{}", still.text);
    server.stop().await;
}

#[tokio::test]
async fn verify_needs_an_admin_key_and_admin_keys_reach_every_namespace() {
    let server = TestServer::start().await;
    let alice = server.key_for("alice");
    let admin = server.admin_key();
    assert_eq!(server.get("/v1/verify", Some(&alice)).await.status, 403);
    assert_eq!(server.get("/v1/verify", None).await.status, 401);
    server.append("carol", &admin, vec![turn("s", 0, "hi")]).await;
    let verified = server.get("/v1/verify", Some(&admin)).await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    assert_eq!(verified.body["ok"], true);
    assert_eq!(verified.body["turns"], 1);
    let bad_name = server.get("/v1/namespaces/bad%2Fname/stats", Some(&admin)).await;
    assert_eq!(
        (bad_name.status, bad_name.body["field"].as_str()),
        (422, Some("namespace")),
        "{}",
        bad_name.text
    );
    server.stop().await;
}

#[tokio::test]
async fn healthz_needs_no_key_and_revoked_keys_stop_working() {
    let server = TestServer::start().await;
    let health = server.get("/healthz", None).await;
    assert_eq!((health.status, health.body["status"].as_str()), (200, Some("ok")));
    let key = server.state.keys().create(&evicortex_server::KeyScope::Admin).expect("create");
    assert_eq!(server.get("/v1/verify", Some(&key.secret)).await.status, 200);
    server.state.keys().revoke(&key.key_id).expect("revoke");
    assert_eq!(server.get("/v1/verify", Some(&key.secret)).await.status, 401);
    server.stop().await;
}
