//! The inspector's assets and the two routes it adds: namespaces a key may read, and a
//! namespace's sessions, with the same 401/403 rules as every other route.

use evicortex_server::ServerConfig;
use serde_json::json;

use crate::harness::{Mode, TestServer, turn};

async fn lexical_server() -> TestServer {
    TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await
}

#[tokio::test]
async fn ui_assets_are_served_with_their_types_and_a_strict_csp() {
    let server = lexical_server().await;
    for (path, content_type) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
    ] {
        let response =
            server.client.get(format!("{}{path}", server.base)).send().await.expect("request");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let headers = response.headers();
        assert_eq!(headers["content-type"], content_type, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        let csp = headers["content-security-policy"].to_str().expect("ascii");
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        let body = response.text().await.expect("body");
        assert!(!body.is_empty(), "{path}");
    }
    let script = server.get("/ui/app.js", None).await.text;
    // Stored turns are untrusted: the page builds nodes and sets textContent, never HTML.
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("] {
        assert!(!script.contains(sink), "app.js uses {sink}");
    }
    assert!(!script.contains("localStorage"), "the key must not outlive the tab");
    let page = server.get("/ui", None).await.text;
    assert!(!page.contains("<script>") && !page.contains("style="), "inline script or style");
    assert_eq!(server.get("/ui/other.js", None).await.status, 404);
    server.stop().await;
}

#[tokio::test]
async fn namespaces_lists_only_what_the_key_may_read() {
    let server = lexical_server().await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let admin = server.admin_key();
    for (key, ns) in [(&alice, "alice"), (&bob, "bob")] {
        server.append(ns, key, vec![turn("s", 0, "hi")]).await;
    }
    assert_eq!(server.get("/v1/namespaces", None).await.status, 401);
    assert_eq!(server.get("/v1/namespaces", Some("evk_0000")).await.status, 401);
    let own = server.get("/v1/namespaces", Some(&alice)).await;
    assert_eq!(own.status, 200, "{}", own.text);
    assert_eq!(own.body, json!({"admin": false, "namespaces": ["alice"]}));
    let all = server.get("/v1/namespaces", Some(&admin)).await;
    assert_eq!(all.body, json!({"admin": true, "namespaces": ["alice", "bob"]}));
    server.stop().await;
}

#[tokio::test]
async fn sessions_are_per_namespace_in_time_order_with_the_same_401_and_403() {
    let server = lexical_server().await;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let mut alice_turns = vec![turn("later", 3, "a"), turn("later", 5, "b")];
    alice_turns.push(turn("earlier", 0, "c"));
    server.append("alice", &alice, alice_turns).await;
    server.append("bob", &bob, vec![turn("bob-secret", 0, "x")]).await;

    let listed = server.get("/v1/namespaces/alice/sessions", Some(&alice)).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(
        listed.body,
        json!({"namespace": "alice", "sessions": [
            {"session": "earlier", "turns": 1,
             "first": "2024-05-01T10:00:00+01:00", "last": "2024-05-01T10:00:00+01:00"},
            {"session": "later", "turns": 2,
             "first": "2024-05-04T10:03:00+01:00", "last": "2024-05-06T10:05:00+01:00"},
        ]})
    );
    assert_eq!(server.get("/v1/namespaces/alice/sessions", None).await.status, 401);
    let forbidden = server.get("/v1/namespaces/bob/sessions", Some(&alice)).await;
    let absent = server.get("/v1/namespaces/nobody/sessions", Some(&alice)).await;
    assert_eq!(forbidden.status, 403, "{}", forbidden.text);
    assert_eq!(forbidden.text, absent.text, "the 403 says nothing about bob");
    assert!(!forbidden.text.contains("bob"), "{}", forbidden.text);

    let erased =
        server.post("/v1/namespaces/alice/erase", &alice, &json!({"session": "earlier"})).await;
    assert_eq!(erased.status, 200, "{}", erased.text);
    let after = server.get("/v1/namespaces/alice/sessions", Some(&alice)).await;
    assert_eq!(after.body["sessions"].as_array().map(Vec::len), Some(1), "{}", after.text);
    server.stop().await;
}
