use crate::harness::TestServer;

#[tokio::test]
async fn openapi_document_lists_every_route_and_the_bearer_scheme() {
    let server = TestServer::start().await;
    let reply = server.get("/openapi.json", None).await;
    assert_eq!(reply.status, 200);
    let paths = reply.body["paths"].as_object().expect("paths");
    for path in [
        "/healthz",
        "/openapi.json",
        "/v1/verify",
        "/v1/namespaces/{ns}/turns",
        "/v1/namespaces/{ns}/compile",
        "/v1/namespaces/{ns}/answer",
        "/v1/namespaces/{ns}/erase",
        "/v1/namespaces/{ns}/stats",
        "/v1/namespaces/{ns}/export",
        "/v1/namespaces",
        "/v1/namespaces/{ns}/sessions",
        "/v1/chat/completions",
        "/v1/models",
    ] {
        assert!(
            paths.contains_key(path),
            "{path} missing from {:?}",
            paths.keys().collect::<Vec<_>>()
        );
    }
    assert_eq!(reply.body["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    // The costly operations document their refusal when the queue is full, and when to retry.
    for path in
        ["/v1/namespaces/{ns}/compile", "/v1/namespaces/{ns}/answer", "/v1/chat/completions"]
    {
        let responses = &paths[path]["post"]["responses"];
        for status in ["429", "503"] {
            let retry = &responses[status]["headers"]["Retry-After"];
            assert!(retry["schema"].is_object(), "{path} {status}: {}", responses[status]);
        }
    }
    let turn = &reply.body["components"]["schemas"]["TurnInput"]["properties"];
    for field in ["session", "turn", "role", "speaker", "text", "time", "meta"] {
        assert!(turn.get(field).is_some(), "TurnInput.{field} missing");
    }
    server.stop().await;
}
