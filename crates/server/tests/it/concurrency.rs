use std::collections::BTreeSet;

use evicortex::Namespace;
use serde_json::json;

use crate::harness::{TestServer, turn};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_and_reads_lose_no_acknowledged_turn() {
    let server = std::sync::Arc::new(TestServer::start().await);
    let key = server.key_for("busy");
    let writers = 32;
    let appends_per_writer = 8;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (server, key) = (server.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0..appends_per_writer {
                let text = format!("writer {w} append {i}");
                let body = json!({"turns": [turn(&format!("w{w}"), i, &text), turn(&format!("w{w}"), i + 100, &text)]});
                let reply = server.post("/v1/namespaces/busy/turns", &key, &body).await;
                assert_eq!(reply.status, 200, "{}", reply.text);
                acked.push(text);
                let stats = server.get("/v1/namespaces/busy/stats", Some(&key)).await;
                assert_eq!(stats.status, 200, "{}", stats.text);
            }
            acked
        }));
    }
    let mut acked = BTreeSet::new();
    for task in tasks {
        acked.extend(task.await.expect("writer task"));
    }
    let evidence =
        server.state.memory().evidence(&Namespace::new("busy").expect("ns")).expect("evidence");
    assert_eq!(evidence.len(), writers * appends_per_writer as usize * 2);
    let stored: BTreeSet<_> = evidence.iter().map(|e| e.turn.text.clone()).collect();
    assert_eq!(stored, acked);
    let admin = server.admin_key();
    assert_eq!(server.get("/v1/verify", Some(&admin)).await.status, 200);
}
