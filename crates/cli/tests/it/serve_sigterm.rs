//! `evicortex serve` as a real process: concurrent appends, SIGTERM while they run, a clean exit,
//! then `verify` passes and every acknowledged turn is in the store.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use evicortex::Namespace;
use serde_json::json;

use crate::cli::{command, create_key, ok, sigterm, spawn_serve};

#[test]
fn sigterm_drains_in_flight_appends_and_the_store_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let key = create_key(&store, "busy");

    let mut serve = command(&store, &["serve", "--listen", "127.0.0.1:0"]);
    serve.stderr(Stdio::inherit());
    let (mut server, base) = spawn_serve(serve);
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let client =
        reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let (client, base, key, stop) =
                (client.clone(), base.clone(), key.clone(), stop.clone());
            runtime.spawn(async move {
                let mut acked = Vec::new();
                let mut refused = 0u32;
                for i in 0u32.. {
                    let text = format!("writer {w} turn {i}");
                    let body = json!({"turns": [{
                        "session": format!("w{w}"), "turn": i, "role": "user", "text": text,
                        "time": "2024-05-02T10:00:00+01:00",
                    }]});
                    let sent = client
                        .post(format!("{base}/v1/namespaces/busy/turns"))
                        .bearer_auth(&key)
                        .json(&body)
                        .send()
                        .await;
                    match sent {
                        Ok(response) if response.status().is_success() => {
                            // Acknowledged only once the whole 200 response has been read.
                            if response.text().await.is_ok() {
                                acked.push(text);
                            }
                        }
                        Ok(response) => {
                            panic!("writer {w}: status {} before shutdown", response.status())
                        }
                        // After SIGTERM: connection refused or closed; nothing acknowledged.
                        Err(_) if stop.load(Ordering::SeqCst) => {
                            refused += 1;
                            if refused > 3 {
                                break;
                            }
                        }
                        Err(e) => panic!("writer {w}: {e} before shutdown"),
                    }
                }
                acked
            })
        })
        .collect();

    // Let the writers get going, then terminate the server while they are still sending.
    runtime.block_on(async {
        loop {
            let stats = client
                .get(format!("{base}/v1/namespaces/busy/stats"))
                .bearer_auth(&key)
                .send()
                .await
                .expect("stats");
            let body: serde_json::Value = stats.json().await.expect("json");
            if body["turns"].as_u64().unwrap_or(0) >= 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    stop.store(true, Ordering::SeqCst);
    sigterm(&server);
    let status = server.wait().expect("wait for the server");
    assert!(status.success(), "server exit after SIGTERM: {status}");

    let mut acked = BTreeSet::new();
    for writer in writers {
        acked.extend(runtime.block_on(writer).expect("writer task"));
    }
    assert!(acked.len() >= 200, "{} acknowledged", acked.len());

    ok(&store, &["verify"]);

    let memory = evicortex::Memory::open_read_only(&store).expect("open");
    let stored: BTreeSet<String> = memory
        .evidence(&Namespace::new("busy").expect("ns"))
        .expect("evidence")
        .into_iter()
        .map(|e| e.turn.text)
        .collect();
    let lost: Vec<_> = acked.difference(&stored).collect();
    assert!(lost.is_empty(), "{} acknowledged turns lost, e.g. {:?}", lost.len(), lost.first());
    eprintln!("sigterm: {} acknowledged appends, {} stored, none lost", acked.len(), stored.len());
}

/// `serve` on a store without API keys says so, and what to run, instead of starting silently
/// and answering 401 to everything.
#[test]
fn serve_without_keys_says_how_to_create_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let mut serve = command(&store, &["serve", "--lexical-only", "--listen", "127.0.0.1:0"]);
    serve.stderr(Stdio::piped());
    let (server, base) = spawn_serve(serve);
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    sigterm(&server);
    let out = server.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("has no API keys"), "{stderr}");
    assert!(stderr.contains("keys create --namespace"), "{stderr}");
    assert!(stderr.contains("Authorization: Bearer"), "{stderr}");
}
