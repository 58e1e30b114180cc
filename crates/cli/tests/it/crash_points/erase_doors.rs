//! An erasure in flight through the front ends, killed at random moments: `POST
//! /v1/namespaces/{ns}/erase` on `evicortex serve` while another client appends batches, and the
//! `forget` tool of `evicortex mcp` over stdio after a `remember`. The server is SIGKILLed at a
//! random delay after the erasure request was sent. Then the store is checked as in `erase`
//! (reopened as a restarted writer would, the marker in no file, `verify`), and every batch
//! whose append was acknowledged is in `export`, whole, as is every batch found there. An
//! erasure whose response was received before the kill must have erased the session.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, ChildStdin, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use evicortex::Memory;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::{
    Row, Window,
    erase::{
        NAMESPACE, check_erasure, count_erase_kill, filled_store, secret, secret_session, turns,
    },
    kill_after,
    serve::{BATCH, append_batches},
};
use crate::cli::{command, create_key, spawn_serve};

/// What one run through a front end saw before and at its kill.
struct Seen {
    /// The erasure's success response was received.
    erase_acked: bool,
    /// Sessions whose appends were acknowledged.
    appended: Vec<String>,
}

/// The erasure over HTTP, with a client appending batches beside it.
pub fn http(rng: StdRng, wanted: usize) -> Row {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let mut key = None;
    each_run(rng, wanted, |store, run, session, delay| {
        let key = key.get_or_insert_with(|| create_key(store, NAMESPACE)).clone();
        let mut serve = command(store, &["serve", "--lexical-only", "--listen", "127.0.0.1:0"]);
        serve.stderr(Stdio::null());
        let (mut child, base) = spawn_serve(serve);
        let signalled = Arc::new(AtomicBool::new(false));
        let appender = runtime.spawn(append_batches(
            client.clone(),
            base.clone(),
            key.clone(),
            NAMESPACE,
            signalled.clone(),
            run,
            0,
        ));
        let request = client
            .post(format!("{base}/v1/namespaces/{NAMESPACE}/erase"))
            .bearer_auth(&key)
            .json(&json!({ "session": session }));
        let erase = runtime.spawn(async move { request.send().await });
        let sent = Instant::now();
        std::thread::sleep(delay);
        let running = child.try_wait().unwrap().is_none();
        signalled.store(true, Ordering::SeqCst);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(running, "serve exited by itself within {:?}", sent.elapsed());
        let erase_acked = match runtime.block_on(erase).unwrap() {
            Ok(response) if response.status().is_success() => {
                runtime.block_on(response.bytes()).is_ok()
            }
            Ok(response) => panic!("the erasure was refused: {}", response.status()),
            Err(_) => false,
        };
        let appended = runtime.block_on(appender).unwrap();
        assert!(
            appended.refused_before_signal.is_empty(),
            "appends refused before the kill: {:?}",
            appended.refused_before_signal
        );
        Seen { erase_acked, appended: appended.acked }
    })
}

/// The erasure through the MCP `forget` tool, after a `remember` of a batch.
pub fn mcp(rng: StdRng, wanted: usize) -> Row {
    each_run(rng, wanted, |store, run, session, delay| {
        let mut child = command(store, &["mcp", "--namespace", NAMESPACE, "--lexical-only"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut mcp = Mcp::start(&mut child);
        let kept = format!("r{run}-mcp");
        let batch: Vec<Value> = (0..BATCH)
            .map(|t| {
                json!({"session": kept, "turn": t, "role": "user",
                    "text": format!("kept batch {kept} turn {t}"), "time": "2024-05-02T10:00:00Z"})
            })
            .collect();
        let remembered = mcp.call(2, "remember", json!({ "turns": batch }));
        assert_eq!(remembered["isError"], false, "remember: {remembered}");
        mcp.send(3, "forget", json!({ "session": session }));
        let (running, _) = kill_after(&mut child, delay);
        assert!(running, "mcp exited by itself");
        // A response written before the kill is in the pipe: the erasure was acknowledged.
        let erase_acked = match mcp.after_exit(3) {
            Some(result) => {
                assert_eq!(result["isError"], false, "forget: {result}");
                true
            }
            None => false,
        };
        Seen { erase_acked, appended: vec![kept] }
    })
}

/// The loop both doors share: a session with a marker appended, the door's run killed after a
/// random delay, the store checked.
fn each_run(
    mut rng: StdRng,
    wanted: usize,
    mut door: impl FnMut(&Path, usize, &str, Duration) -> Seen,
) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(dir.path());
    let mut row = Row::new();
    let mut window = Window::new(150.0, 5.0, 10_000.0);
    let mut acked: BTreeSet<String> = BTreeSet::new();
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let (session, marker) = secret_session(&mut rng, run);
        Memory::open(&store).unwrap().append(&turns(&secret(&session, &marker))).unwrap();
        let seen = door(&store, run, &session, window.sample(&mut rng));
        acked.extend(seen.appended);
        let place = check_erasure(&store, &session, &marker, seen.erase_acked, run);
        super::serve::check_batches(&store, NAMESPACE, &acked, run, |s| s.starts_with('r'));
        // None: the server was still killed, after its response: a kill after the erasure.
        count_erase_kill(&mut row, &mut window, place);
        run += 1;
    }
    row
}

/// A minimal MCP client over a child's stdio: JSON-RPC messages, one per line.
struct Mcp {
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Mcp {
    /// Takes the child's pipes and completes the handshake.
    fn start(child: &mut Child) -> Mcp {
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else { break };
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        let mut mcp = Mcp { stdin: child.stdin.take().unwrap(), lines };
        mcp.write(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "crash-points", "version": "0"}}}));
        mcp.wait(1, Duration::from_secs(60)).expect("the MCP handshake");
        mcp.write(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn write(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, id: u64, tool: &str, arguments: Value) {
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// Calls `tool` and returns its result.
    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.send(id, tool, arguments);
        self.wait(id, Duration::from_secs(60)).unwrap_or_else(|| panic!("no answer to {tool}"))
    }

    /// The result of request `id`, when it arrives within `limit`.
    fn wait(&self, id: u64, limit: Duration) -> Option<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.lines.recv_timeout(left).ok()?;
            if message["id"] == id {
                assert!(message.get("error").is_none(), "request {id}: {message}");
                return Some(message["result"].clone());
            }
        }
    }

    /// The result of request `id` among what the killed server wrote before it died.
    fn after_exit(&self, id: u64) -> Option<Value> {
        self.wait(id, Duration::from_secs(10))
    }
}
