//! A failing disk seen through `evicortex serve` (the `faultfs` shim preloaded into the server):
//! the append whose fsync fails gets a 500 naming the disk error and is not stored; the server
//! then refuses writes with a 503 saying to restart it, while reads still answer; after a restart
//! the store verifies, every acknowledged batch is there, and the refused batch can be sent again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::cli::ok;
use crate::faults::faultfs;
use crate::serve_sigterm::create_key;

fn serve(store: &Path, control: &Path) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_evicortex"))
        .arg("--store")
        .arg(store)
        .args(["serve", "--listen", "127.0.0.1:0", "--lexical-only"])
        .env_remove("EVICORTEX_HOME")
        .env("LD_PRELOAD", faultfs())
        .env("FAULTFS_CONTROL", control)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start evicortex serve");
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut line).expect("address");
    let base = line.trim().strip_prefix("listening on ").expect("address line").to_owned();
    (server, base)
}

fn stop(mut server: Child) {
    let killed = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(killed.success());
    server.wait().expect("wait for the server");
}

/// The server's HTTP API for namespace `a`, blocking.
struct Api {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    key: String,
}

impl Api {
    /// Posts turns `from..to` of session `s`; returns the status and the body.
    fn append(&self, base: &str, from: u32, to: u32) -> (u16, Value) {
        let turns: Vec<Value> = (from..to)
            .map(|i| {
                json!({"session": "s", "turn": i, "role": "user", "text": format!("turn {i}"),
                    "time": "2024-05-02T10:00:00Z"})
            })
            .collect();
        let request = self
            .client
            .post(format!("{base}/v1/namespaces/a/turns"))
            .bearer_auth(&self.key)
            .json(&json!({ "turns": turns }));
        self.send(request)
    }

    fn stats(&self, base: &str) -> (u16, Value) {
        self.send(self.client.get(format!("{base}/v1/namespaces/a/stats")).bearer_auth(&self.key))
    }

    fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        self.runtime.block_on(async {
            let response = request.send().await.expect("request");
            (response.status().as_u16(), response.json().await.expect("a JSON body"))
        })
    }
}

#[test]
fn a_failed_fsync_under_serve_is_500_then_503_until_a_restart_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let control = dir.path().join("faultfs-control");
    let fired = dir.path().join("faultfs-control.fired");
    let api = Api {
        runtime: tokio::runtime::Runtime::new().unwrap(),
        client: reqwest::Client::new(),
        key: create_key(&store, "a"),
    };

    let (server, base) = serve(&store, &control);
    assert_eq!(api.append(&base, 0, 4).0, 200);
    fs_err::write(&control, "fsync 1\n").unwrap();
    let (status, body) = api.append(&base, 4, 8);
    assert!(fired.exists(), "the fault never fired: {status} {body}");
    assert_eq!(status, 500, "{body}");
    assert!(body["error"].as_str().unwrap().contains("disk I/O error"), "{body}");
    // The disk works again, but whether the failed write reached it is unknown: writes are
    // refused until the store is opened again; reads still answer.
    let (status, body) = api.append(&base, 8, 12);
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("restart the server"), "{body}");
    let (status, body) = api.stats(&base);
    assert_eq!(status, 200, "{body}");
    stop(server);

    ok(&store, &["verify"]);
    let exported = ok(&store, &["export"]);
    assert_eq!(exported.lines().count(), 4, "only the acknowledged batch: {exported}");
    let (server, base) = serve(&store, &control);
    assert_eq!(api.append(&base, 4, 8).0, 200);
    assert_eq!(api.stats(&base).1["turns"].as_u64(), Some(8));
    stop(server);
    ok(&store, &["verify"]);
}
