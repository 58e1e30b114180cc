//! `evicortex serve --index-cache-mib`: a namespace whose indexes exceed the whole budget is
//! kept alone, and the server says so on standard error instead of holding more memory than
//! asked in silence.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::cli::{command, create_key, ok, sigterm, spawn_serve};

#[test]
fn a_namespace_bigger_than_the_index_cache_is_reported_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let key = create_key(&store, "big");
    let file = dir.path().join("turns.jsonl");
    // About 4,000 turns: the cache's estimate passes 1 MiB.
    let lines: Vec<String> = (0..4_000)
        .map(|t| {
            json!({"namespace": "big", "session": format!("s{}", t / 100), "turn": t % 100,
                   "role": "user", "text": format!("turn {t} about the garden and its {t} roses"),
                   "time": "2024-05-02T10:00:00Z"})
            .to_string()
        })
        .collect();
    fs_err::write(&file, lines.join("\n")).expect("write turns");
    ok(&store, &["ingest", "--no-embed", file.to_str().expect("utf-8 path")]);

    let mut serve = command(
        &store,
        &["serve", "--listen", "127.0.0.1:0", "--lexical-only", "--index-cache-mib", "1"],
    );
    serve.stderr(Stdio::piped());
    let (mut server, base) = spawn_serve(serve);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let client =
        reqwest::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
    runtime.block_on(async {
        let response = client
            .post(format!("{base}/v1/namespaces/big/compile"))
            .bearer_auth(&key)
            .json(&json!({"query": "roses in the garden", "budget": 200,
                          "reader_tokenizer": "o200k_base"}))
            .send()
            .await
            .expect("compile");
        let status = response.status();
        let body = response.text().await.expect("body");
        assert!(status.is_success(), "{status}: {body}");
    });
    sigterm(&server);
    server.wait().expect("wait for the server");
    let mut stderr = String::new();
    server.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    assert!(
        stderr.contains("alone exceed the index cache budget") && stderr.contains("big"),
        "{stderr}"
    );
}
