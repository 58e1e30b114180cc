//! A failing disk seen through `evicortex serve` (the `faultfs` shim preloaded into the server):
//! the append whose fsync fails gets a 500 naming the disk error and is not stored; the server
//! then refuses writes with a 503 saying to restart it, while reads still answer; after a restart
//! the store verifies, every acknowledged batch is there, and the refused batch can be sent again.
//! And a real full disk under a running server (a small tmpfs in a private mount namespace):
//! 507 while it is full, reads answering, the same batch accepted once space is free.

use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use crate::cli::{command, create_key, ok, sigterm, spawn_serve};
use crate::faults::{faultfs, spawn_in_small_tmpfs, step};

fn serve(store: &Path, control: &Path) -> (Child, String) {
    let mut serve = command(store, &["serve", "--listen", "127.0.0.1:0", "--lexical-only"]);
    serve.env("LD_PRELOAD", faultfs()).env("FAULTFS_CONTROL", control).stderr(Stdio::null());
    spawn_serve(serve)
}

fn stop(mut server: Child) {
    sigterm(&server);
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

/// Waits up to a minute for `path` to exist.
fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_full_disk_under_serve_is_507_reads_still_answer_and_the_batch_is_taken_once_space_is_free() {
    let dir = tempfile::tempdir().unwrap();
    // The server runs inside the namespace that holds the tmpfs; the test talks to it over
    // loopback (the network is not unshared) and steps the script along with marker files.
    let script = "S=\"$MNT/store\"\n\
        step key \"$E\" --store \"$S\" keys create --namespace a\n\
        \"$E\" --store \"$S\" serve --listen 127.0.0.1:0 --lexical-only >\"$OUT/serve.out\" 2>\"$OUT/serve.err\" &\n\
        SERVE=$!\n\
        until grep -q listening \"$OUT/serve.out\" 2>/dev/null; do sleep 0.05; done\n\
        head -c 100000000 /dev/zero >\"$MNT/filler\" 2>/dev/null\n\
        touch \"$OUT/full\"\n\
        until [ -e \"$OUT/free\" ]; do sleep 0.05; done\n\
        rm \"$MNT/filler\"; touch \"$OUT/freed\"\n\
        until [ -e \"$OUT/stop\" ]; do sleep 0.05; done\n\
        kill -TERM $SERVE; wait $SERVE; echo $? >\"$OUT/serve.code\"\n\
        step verify \"$E\" --store \"$S\" verify\n\
        step export \"$E\" --store \"$S\" export\n";
    let (mut script_run, out) = spawn_in_small_tmpfs(dir.path(), 2048, script);
    let api = Api {
        runtime: tokio::runtime::Runtime::new().unwrap(),
        client: reqwest::Client::new(),
        key: step_when_done(&out, "key").stdout.lines().last().unwrap().trim().to_owned(),
    };
    wait_for(&out.join("full"));
    let served = fs_err::read_to_string(out.join("serve.out")).unwrap();
    let base = served.lines().next().unwrap().strip_prefix("listening on ").unwrap().to_owned();

    // Appends until the disk refuses one: the WAL may hold a little room of its own.
    let mut acknowledged = 0u32;
    let (status, body) = loop {
        let (status, body) = api.append(&base, acknowledged, acknowledged + 4);
        if status != 200 || acknowledged >= 400 {
            break (status, body);
        }
        acknowledged += 4;
    };
    assert_eq!(status, 507, "after {acknowledged} acknowledged turns: {body}");
    eprintln!("507 after {acknowledged} acknowledged turns: {body}");
    assert!(body["error"].as_str().unwrap().contains("disk is full"), "{body}");
    assert!(!body["error"].as_str().unwrap().contains("/mnt/"), "the server's folders: {body}");
    let (status, body) = api.stats(&base);
    assert_eq!((status, body["turns"].as_u64()), (200, Some(u64::from(acknowledged))), "{body}");
    // Still full: still 507, not a poisoned store.
    assert_eq!(api.append(&base, acknowledged, acknowledged + 4).0, 507);

    fs_err::write(out.join("free"), "").unwrap();
    wait_for(&out.join("freed"));
    let (status, body) = api.append(&base, acknowledged, acknowledged + 4);
    assert_eq!(status, 200, "the same batch once space is free: {body}");
    acknowledged += 4;
    fs_err::write(out.join("stop"), "").unwrap();
    assert!(script_run.wait().unwrap().success());

    assert_eq!(fs_err::read_to_string(out.join("serve.code")).unwrap().trim(), "0");
    let server_log = fs_err::read_to_string(out.join("serve.err")).unwrap();
    assert!(!server_log.contains("panicked"), "{server_log}");
    assert_eq!(step(&out, "verify").code, 0, "{}", step(&out, "verify").stderr);
    let exported = step(&out, "export").stdout;
    assert_eq!(exported.lines().count(), acknowledged as usize, "stored = acknowledged");
}

/// The step `name` of a running script, once it has finished.
fn step_when_done(out: &Path, name: &str) -> crate::cli::Run {
    wait_for(&out.join(format!("{name}.code")));
    step(out, name)
}
