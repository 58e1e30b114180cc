//! `evicortex serve` killed under append load: several HTTP clients append batches (one session
//! of `BATCH` turns each) until the server dies; a batch is acknowledged once its 2xx response has
//! been read in full. Killed with SIGKILL at a random moment, or sent SIGTERM at a random moment
//! and SIGKILLed at a random delay after it (while it drains, or after it exited). After each
//! run: `verify` passes, every acknowledged batch is in `export`, no batch is partial.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use rand::rngs::StdRng;
use serde_json::json;

use super::{Row, Window};
use crate::cli::{command, ok};

const NAMESPACE: &str = "load";
pub const BATCH: usize = 8;
const CLIENTS: usize = 4;
/// Runs sharing one store before a fresh one is started (keeps `export` small).
const RUNS_PER_STORE: usize = 25;

/// SIGKILL at a random moment after the server started, while clients append.
pub fn append_load(rng: StdRng, kills: usize) -> Row {
    Scenario::new(rng, false).run(kills)
}

/// SIGTERM at a random moment under load, then SIGKILL at a random delay after it.
pub fn shutdown(rng: StdRng, kills: usize) -> Row {
    Scenario::new(rng, true).run(kills)
}

struct Scenario {
    rng: StdRng,
    sigterm_first: bool,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    dir: tempfile::TempDir,
    /// From the server's start (or, with SIGTERM, from its address line) to the signal.
    window: Window,
    /// From SIGTERM to SIGKILL.
    drain_window: Window,
}

/// One server run: the process, its address once printed, the clients' tasks.
struct Launched {
    child: Child,
    listening: std::thread::JoinHandle<Option<Vec<tokio::task::JoinHandle<Appended>>>>,
}

/// What one client saw.
#[derive(Default)]
pub struct Appended {
    pub acked: Vec<String>,
    /// Non-2xx statuses received before any signal was sent: each one is a failure.
    pub refused_before_signal: Vec<String>,
}

impl Scenario {
    fn new(rng: StdRng, sigterm_first: bool) -> Scenario {
        Scenario {
            rng,
            sigterm_first,
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
            client: reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap(),
            dir: tempfile::tempdir().unwrap(),
            window: Window::new(if sigterm_first { 100.0 } else { 300.0 }, 5.0, 10_000.0),
            drain_window: Window::new(20.0, 0.5, 2_000.0),
        }
    }

    fn run(mut self, wanted: usize) -> Row {
        let mut row = Row::new();
        let (mut store, mut key) = (PathBuf::new(), String::new());
        let mut acked_in_store: BTreeSet<String> = BTreeSet::new();
        let mut run = 0;
        while row.kills < wanted {
            row.check_progress(run, wanted);
            if run % RUNS_PER_STORE == 0 {
                store = self.dir.path().join(format!("store{run}"));
                key = create_key(&store);
                acked_in_store.clear();
            }
            let signalled = Arc::new(AtomicBool::new(false));
            let launched = self.launch(&store, &key, run, &signalled);
            let outcome = if self.sigterm_first {
                self.terminate_then_kill(launched, &signalled)
            } else {
                self.kill(launched, &signalled)
            };
            assert!(
                outcome.refused.is_empty(),
                "run {run}: appends refused before any signal: {:?}",
                outcome.refused
            );
            let acked_now = outcome.acked.len();
            acked_in_store.extend(outcome.acked);
            check_store(&store, &acked_in_store, run);
            match outcome.ending {
                Ending::Killed(place) => {
                    row.kill(place);
                    if acked_now == 0 {
                        self.window.scale(1.5);
                    } else {
                        self.window.scale(0.95);
                    }
                    if self.sigterm_first {
                        self.drain_window.scale(1.1);
                    }
                }
                Ending::Exited => {
                    row.completed += 1;
                    self.drain_window.scale(0.7);
                }
                Ending::Uncounted(place) => {
                    *row.landed.entry(place).or_default() += 1;
                }
            }
            run += 1;
        }
        row
    }

    /// Starts the server; a thread reads its address line and then starts the clients.
    fn launch(&self, store: &Path, key: &str, run: usize, signalled: &Arc<AtomicBool>) -> Launched {
        let mut child = command(store, &["serve", "--lexical-only", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (handle, client, key, signalled) =
            (self.runtime.handle().clone(), self.client.clone(), key.to_owned(), signalled.clone());
        let listening = std::thread::spawn(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).ok()?;
            let base = line.trim().strip_prefix("listening on ")?.to_owned();
            Some(
                (0..CLIENTS)
                    .map(|c| {
                        let (client, base, key, signalled) =
                            (client.clone(), base.clone(), key.clone(), signalled.clone());
                        handle
                            .spawn(append_batches(client, base, key, NAMESPACE, signalled, run, c))
                    })
                    .collect(),
            )
        });
        Launched { child, listening }
    }

    fn kill(&mut self, mut launched: Launched, signalled: &AtomicBool) -> Outcome {
        std::thread::sleep(self.window.sample(&mut self.rng));
        let running = launched.child.try_wait().unwrap().is_none();
        signalled.store(true, Ordering::SeqCst);
        launched.child.kill().unwrap();
        let status = launched.child.wait().unwrap();
        assert!(running || !status.success(), "serve exited by itself: {status}");
        let (listened, appended) = self.collect(launched);
        let ending = Ending::Killed(match (listened, appended.acked.len()) {
            (false, _) => "before the address line",
            (true, 0) => "listening, before the first ack",
            (true, _) => "under load, after acks",
        });
        Outcome { ending, acked: appended.acked, refused: appended.refused_before_signal }
    }

    fn terminate_then_kill(&mut self, mut launched: Launched, signalled: &AtomicBool) -> Outcome {
        // SIGTERM's handler exists once the address line is out: wait for it (the clients start
        // then too), so the signal tests the drain rather than the default action.
        let started = Instant::now();
        while !launched.listening.is_finished() {
            assert!(started.elapsed() < Duration::from_secs(60), "serve printed no address");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(self.window.sample(&mut self.rng));
        signalled.store(true, Ordering::SeqCst);
        let term = Command::new("kill")
            .args(["-TERM", &launched.child.id().to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        std::thread::sleep(self.drain_window.sample(&mut self.rng));
        let running = launched.child.try_wait().unwrap().is_none();
        launched.child.kill().unwrap();
        let status = launched.child.wait().unwrap();
        let (listened, appended) = self.collect(launched);
        assert!(listened, "serve printed no address");
        let ending = if running {
            Ending::Killed(if appended.acked.is_empty() {
                "draining after SIGTERM, before the first ack"
            } else {
                "draining after SIGTERM, after acks"
            })
        } else if status.success() {
            Ending::Exited
        } else {
            // The handler was not yet installed: SIGTERM's default action ended the process.
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(15), "serve after SIGTERM: {status}");
            Ending::Uncounted("ended by SIGTERM before its handler (not counted)")
        };
        Outcome { ending, acked: appended.acked, refused: appended.refused_before_signal }
    }

    /// Waits for the clients (they stop at the first failed request) and gathers their acks.
    fn collect(&self, launched: Launched) -> (bool, Appended) {
        let Some(tasks) = launched.listening.join().unwrap() else {
            return (false, Appended::default());
        };
        let mut all = Appended::default();
        for task in tasks {
            let one = self.runtime.block_on(task).unwrap();
            all.acked.extend(one.acked);
            all.refused_before_signal.extend(one.refused_before_signal);
        }
        (true, all)
    }
}

enum Ending {
    /// SIGKILL hit the running server.
    Killed(&'static str),
    /// The server exited (after SIGTERM) before the SIGKILL.
    Exited,
    /// The run ended otherwise and is listed, not counted as a kill.
    Uncounted(&'static str),
}

struct Outcome {
    ending: Ending,
    acked: Vec<String>,
    refused: Vec<String>,
}

/// Appends batches (one session of `BATCH` turns each) to `namespace` until a request fails.
pub async fn append_batches(
    client: reqwest::Client,
    base: String,
    key: String,
    namespace: &'static str,
    signalled: Arc<AtomicBool>,
    run: usize,
    c: usize,
) -> Appended {
    let mut out = Appended::default();
    for b in 0.. {
        let session = format!("r{run}-c{c}-b{b}");
        let turns: Vec<_> = (0..BATCH)
            .map(|t| {
                json!({"session": session, "turn": t, "role": "user",
                    "text": format!("run {run} client {c} batch {b} turn {t}"),
                    "time": "2024-05-02T10:00:00Z"})
            })
            .collect();
        let sent = client
            .post(format!("{base}/v1/namespaces/{namespace}/turns"))
            .bearer_auth(&key)
            .json(&json!({ "turns": turns }))
            .send()
            .await;
        match sent {
            // Acknowledged only once the whole 2xx response has been read.
            Ok(response) if response.status().is_success() => match response.bytes().await {
                Ok(_) => out.acked.push(session),
                Err(_) => break,
            },
            Ok(response) => {
                if !signalled.load(Ordering::SeqCst) {
                    out.refused_before_signal.push(format!("{session}: {}", response.status()));
                }
                break;
            }
            Err(_) => break,
        }
    }
    out
}

fn create_key(store: &Path) -> String {
    let out = ok(store, &["keys", "create", "--namespace", NAMESPACE]);
    out.lines().last().expect("a key on the last line").trim().to_owned()
}

/// `verify` passes, every acknowledged batch is exported whole, and no batch is partial.
fn check_store(store: &Path, acked: &BTreeSet<String>, run: usize) {
    if !store.join(evicortex::LEDGER_FILE).exists() {
        assert!(acked.is_empty(), "run {run}: batches acknowledged but no ledger file");
        return;
    }
    ok(store, &["verify"]);
    check_batches(store, NAMESPACE, acked, run, |_| true);
}

/// Every acknowledged batch of `namespace` is exported whole, and no batch of a session that
/// `is_batch` takes is partial.
pub(super) fn check_batches(
    store: &Path,
    namespace: &str,
    acked: &BTreeSet<String>,
    run: usize,
    is_batch: impl Fn(&str) -> bool,
) {
    let exported = ok(store, &["export", "--namespace", namespace]);
    let mut present: BTreeMap<String, usize> = BTreeMap::new();
    for line in exported.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let session = v["session"].as_str().unwrap();
        if is_batch(session) {
            *present.entry(session.to_owned()).or_default() += 1;
        }
    }
    for (session, n) in &present {
        assert_eq!(*n, BATCH, "run {run}: batch {session} is partial ({n} of {BATCH} turns)");
    }
    for session in acked {
        assert!(
            present.contains_key(session),
            "run {run}: acknowledged batch {session} is missing"
        );
    }
}
