//! Every operation the OpenAPI document lists, under every kind of key: none, a malformed one,
//! a revoked one, another namespace's, the namespace's own and an admin key. The cases come
//! from the document (its paths, methods and security requirements): an operation it lists
//! without an example request here fails the test, so a new route cannot skip it.

use evicortex::Namespace;
use evicortex_server::{KeyScope, ServerConfig};
use serde_json::{Value, json};

use crate::harness::{Mode, TestServer, turn};

/// A request that the operation accepts from an authorised key.
struct Example {
    /// Turns appended to `alice` (by an admin key) before each authorised call.
    setup: Option<Value>,
    body: Option<Value>,
    /// The status of an authorised call (503 for answer and the chat routes: this server has
    /// no reader).
    success: u16,
}

fn example(method: &str, path: &str, n: usize) -> Option<Example> {
    let read = |success| Some(Example { setup: None, body: None, success });
    let probe = format!("probe-{n}");
    match (method, path) {
        ("get", "/healthz" | "/openapi.json" | "/v1/verify" | "/v1/namespaces") => read(200),
        ("get", "/v1/namespaces/{ns}/stats" | "/v1/namespaces/{ns}/export") => read(200),
        ("get", "/v1/namespaces/{ns}/sessions") => read(200),
        ("post", "/v1/namespaces/{ns}/turns") => Some(Example {
            setup: None,
            body: Some(json!({"turns": [turn(&probe, 0, "a probe turn")]})),
            success: 200,
        }),
        ("post", "/v1/namespaces/{ns}/compile") => Some(Example {
            setup: None,
            body: Some(json!({"query": "probe", "budget": 100, "reader_tokenizer": "o200k_base"})),
            success: 200,
        }),
        ("post", "/v1/namespaces/{ns}/answer") => Some(Example {
            setup: None,
            body: Some(json!({"query": "probe", "budget": 100})),
            success: 503,
        }),
        // This server has no reader: an authorised call learns so.
        ("get", "/v1/models") => read(503),
        ("post", "/v1/chat/completions") => Some(Example {
            setup: None,
            body: Some(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
            success: 503,
        }),
        ("post", "/v1/namespaces/{ns}/erase") => Some(Example {
            setup: Some(json!({"turns": [turn(&probe, 0, "a turn to erase")]})),
            body: Some(json!({"session": probe})),
            success: 200,
        }),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    None,
    Malformed,
    Revoked,
    OtherNamespace,
    OwnNamespace,
    Admin,
}

/// What the operation's security requirement says a key gets: 401 for no valid key, 403 for a
/// key the route does not grant (another namespace's on a `{ns}` route, a namespace key on a
/// route for the role `admin`), else the example's success.
fn expected(key: Key, security: Option<&[String]>, has_ns: bool, success: u16) -> u16 {
    let Some(roles) = security else { return success };
    let admin_only = roles.iter().any(|r| r == "admin");
    match key {
        Key::None | Key::Malformed | Key::Revoked => 401,
        Key::OtherNamespace if has_ns || admin_only => 403,
        Key::OwnNamespace if admin_only => 403,
        _ => success,
    }
}

/// The roles of the operation's `bearer` requirement; `None` when it needs no key.
fn bearer_roles(operation: &Value, method: &str, path: &str) -> Option<Vec<String>> {
    let requirements = operation.get("security")?.as_array()?;
    assert_eq!(requirements.len(), 1, "{method} {path}: one security requirement expected");
    let roles = requirements[0]["bearer"]
        .as_array()
        .unwrap_or_else(|| panic!("{method} {path}: a requirement other than bearer"));
    Some(roles.iter().map(|r| r.as_str().expect("role").to_owned()).collect())
}

#[tokio::test]
async fn every_documented_operation_answers_each_kind_of_key_as_its_security_says() {
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let doc = server.get("/openapi.json", None).await.body;
    let alice = server.key_for("alice");
    let bob = server.key_for("bob");
    let admin = server.admin_key();
    let keys = server.state.keys();
    let alice_ns = KeyScope::Namespace(Namespace::new("alice").expect("namespace"));
    let revoked_alice = keys.create(&alice_ns).expect("create");
    let revoked_admin = keys.create(&KeyScope::Admin).expect("create");
    keys.revoke(&revoked_alice.key_id).expect("revoke");
    keys.revoke(&revoked_admin.key_id).expect("revoke");

    let paths = doc["paths"].as_object().expect("the document has paths");
    let mut n = 0;
    let mut checked = Vec::new();
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("path item") {
            if !["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let security = bearer_roles(operation, method, path);
            let has_ns = path.contains("{ns}");
            let route = path.replace("{ns}", "alice");
            for key in [
                Key::None,
                Key::Malformed,
                Key::Revoked,
                Key::OtherNamespace,
                Key::OwnNamespace,
                Key::Admin,
            ] {
                n += 1;
                let Some(example) = example(method, path, n) else {
                    panic!(
                        "{method} {path} is in the OpenAPI document but has no example request \
                         in this test: add one to `example`"
                    );
                };
                let admin_only = security.iter().flatten().any(|r| r == "admin");
                let secret = match key {
                    Key::None => None,
                    Key::Malformed => Some("evk_not-a-key".to_owned()),
                    Key::Revoked if admin_only => Some(revoked_admin.secret.clone()),
                    Key::Revoked => Some(revoked_alice.secret.clone()),
                    Key::OtherNamespace => Some(bob.clone()),
                    Key::OwnNamespace => Some(alice.clone()),
                    Key::Admin => Some(admin.clone()),
                };
                if let Some(turns) = &example.setup {
                    let set = server.post("/v1/namespaces/alice/turns", &admin, turns).await;
                    assert_eq!(set.status, 200, "setup of {method} {path}: {}", set.text);
                }
                let body = example.body.as_ref().map(|b| serde_json::to_vec(b).expect("json"));
                let reply =
                    server.send(&method.to_uppercase(), &route, secret.as_deref(), body).await;
                let want = expected(key, security.as_deref(), has_ns, example.success);
                assert_eq!(reply.status, want, "{method} {path} with {key:?}: {}", reply.text);
                if want == 401 || want == 403 {
                    assert!(reply.body["error"].is_string(), "{method} {path}: {}", reply.text);
                }
            }
            checked.push(format!("{method} {path}"));
        }
    }
    // The document's operations, every one of which was checked above.
    assert!(checked.len() >= 11, "too few operations in the document: {checked:?}");
    assert!(checked.iter().any(|c| c == "get /v1/verify"), "{checked:?}");
    server.stop().await;
}
