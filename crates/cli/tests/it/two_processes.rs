//! Two processes on one store: a running `serve` holds the store's writer lock, so a CLI ingest or
//! erase, a second `serve` and an `mcp` server on the same directory are refused at once with a
//! message naming the holder (exit code 3); read-only commands work meanwhile; the lock dies with
//! its process, even under SIGKILL; the ledger stays one chain that verifies, holding every
//! acknowledged turn.

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::{command, create_key, ok, run, sigterm, spawn_serve};

/// A running `evicortex serve --lexical-only` and its base URL.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(store: &Path) -> Server {
        let mut serve = command(store, &["serve", "--lexical-only", "--listen", "127.0.0.1:0"]);
        serve.stderr(Stdio::null());
        let (child, base) = spawn_serve(serve);
        Server { child, base }
    }

    /// Appends one turn through the HTTP API; returns the status code.
    fn append(&self, key: &str, session: &str, text: &str) -> u16 {
        let body = json!({"turns": [{
            "session": session, "turn": 0, "role": "user", "text": text,
            "time": "2024-05-02T10:00:00+01:00",
        }]});
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            reqwest::Client::new()
                .post(format!("{}/v1/namespaces/shared/turns", self.base))
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .expect("send the append")
                .status()
                .as_u16()
        })
    }

    fn stop(mut self) {
        sigterm(&self.child);
        let status = self.child.wait().expect("wait for the server");
        assert!(status.success(), "server exit after SIGTERM: {status}");
    }
}

fn write_turn(dir: &Path, session: &str, text: &str) -> String {
    let path = dir.join(format!("{session}.jsonl"));
    let line = json!({"namespace": "shared", "session": session, "turn": 0, "role": "user",
        "text": text, "time": "2024-05-03T10:00:00Z"});
    fs_err::write(&path, format!("{line}\n")).unwrap();
    path.to_str().unwrap().to_owned()
}

#[track_caller]
fn assert_refused_by(r: &crate::cli::Run, server: &Server, what: &str) {
    assert_eq!(r.code, 3, "{what} while serve runs: exit {}\n{}", r.code, r.stderr);
    assert!(
        names_the_server(&r.stderr, server),
        "{what}: the refusal must name the serving process:\n{}",
        r.stderr
    );
}

/// Whether a refusal says the store is in use by `server`, by pid and command.
fn names_the_server(refusal: &str, server: &Server) -> bool {
    refusal.contains("is in use by another evicortex process")
        && refusal.contains(&format!("pid {}", server.child.id()))
        && refusal.contains("serve")
}

/// A store `serve` runs on, with a key of namespace `shared` and one turn appended over HTTP.
fn served_store() -> (tempfile::TempDir, std::path::PathBuf, String, Server) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let key = create_key(&store, "shared");
    let server = Server::start(&store);
    assert_eq!(server.append(&key, "http", "said over HTTP"), 200);
    (dir, store, key, server)
}

/// Panics unless `store` verifies with exactly the three turns that hold `texts`.
fn assert_verified_holding(store: &Path, texts: [&str; 3]) {
    let verify = ok(store, &["verify"]);
    assert!(verify.starts_with("ok: 3 records verified (3 turns"), "{verify}");
    let export = ok(store, &["export"]);
    for text in texts {
        assert!(export.contains(text), "{text:?} missing from the export:\n{export}");
    }
}

#[test]
fn a_cli_ingest_or_erase_while_serve_runs_is_refused_and_the_ledger_stays_one() {
    let (dir, store, key, server) = served_store();

    let input = write_turn(dir.path(), "cli", "said through the CLI");
    let ingest = run(&store, &["ingest", "--no-embed", &input]);
    assert_refused_by(&ingest, &server, "ingest");
    let erase = run(&store, &["erase", "--namespace", "shared", "--session", "http"]);
    assert_refused_by(&erase, &server, "erase");

    // Readers need no lock, and the refused commands changed nothing.
    let verify = ok(&store, &["verify"]);
    assert!(verify.starts_with("ok: 1 records verified (1 turns"), "{verify}");
    assert!(!ok(&store, &["export"]).contains("said through the CLI"));
    // The server still works after the refusals.
    assert_eq!(server.append(&key, "http2", "said over HTTP again"), 200);
    server.stop();

    // Once the server is gone the same ingest goes through, onto the same chain.
    ok(&store, &["ingest", "--no-embed", &input]);
    assert_verified_holding(
        &store,
        ["said over HTTP", "said over HTTP again", "said through the CLI"],
    );
}

#[test]
fn a_second_server_on_the_same_store_is_refused_and_a_killed_server_leaves_no_stale_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let key = create_key(&store, "shared");
    let mut first = Server::start(&store);
    assert_eq!(first.append(&key, "a", "first server"), 200);

    let started = Instant::now();
    let second = run(&store, &["serve", "--lexical-only", "--listen", "127.0.0.1:0"]);
    assert_refused_by(&second, &first, "a second serve");
    assert!(started.elapsed() < Duration::from_secs(20), "the refusal must come at once");
    let mcp = run(&store, &["mcp", "--lexical-only", "--namespace", "shared"]);
    assert_refused_by(&mcp, &first, "mcp");
    assert_eq!(first.append(&key, "b", "first server again"), 200);

    // SIGKILL: no clean shutdown, yet the kernel drops the lock with the process.
    first.child.kill().expect("SIGKILL the first server");
    first.child.wait().expect("reap the first server");
    let second = Server::start(&store);
    assert_eq!(second.append(&key, "c", "second server"), 200);
    second.stop();

    assert_verified_holding(&store, ["first server", "first server again", "second server"]);
}

/// `migrate` rewrites every record in place: while `serve` holds the store it is refused,
/// naming the server, and the store is left as it was.
#[test]
fn a_migrate_while_serve_runs_is_refused_naming_the_server() {
    let (_dir, store, _key, server) = served_store();
    let migrate = run(&store, &["migrate"]);
    assert_refused_by(&migrate, &server, "migrate");
    server.stop();
    let done = ok(&store, &["migrate"]);
    assert!(done.contains("nothing to do"), "{done}");
    let verify = ok(&store, &["verify"]);
    assert!(verify.starts_with("ok: 1 records verified (1 turns"), "{verify}");
}

/// Keys are not the ledger's: they live in their own database, which a server reads at each
/// request, so `keys` takes no store lock. A key created while `serve` runs is accepted at once,
/// and a key revoked meanwhile is refused at the next request: a leaked key must not stay valid
/// until the server stops.
#[test]
fn keys_are_created_and_revoked_while_serve_runs() {
    let (_dir, store, _key, server) = served_store();
    let created = run(&store, &["keys", "create", "--namespace", "shared"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let key = created.stdout.trim().to_owned();
    assert_eq!(server.append(&key, "new-key", "said with a new key"), 200);
    let key_id = created
        .stderr
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no key id in {:?}", created.stderr))
        .to_owned();
    let revoked = run(&store, &["keys", "revoke", &key_id]);
    assert_eq!(revoked.code, 0, "{}", revoked.stderr);
    assert_eq!(server.append(&key, "revoked-key", "said with a revoked key"), 401);
    server.stop();
}

/// The lock belongs to the facade: a memory another process opens as a writer (as a Python
/// `Memory` does) while `serve` runs is refused with the holder's pid, before anything is
/// written; once the server is gone it opens.
#[test]
fn a_library_writer_on_a_store_serve_holds_is_refused_naming_the_server() {
    let (_dir, store, _key, server) = served_store();
    let refused = evicortex::Memory::builder(&store).lock_store().open().map(|_| ()).unwrap_err();
    assert!(names_the_server(&refused.to_string(), &server), "{refused}");
    assert_eq!(evicortex::ErrorClass::of(&refused), Some(evicortex::ErrorClass::Io));
    server.stop();
    let memory = evicortex::Memory::builder(&store).lock_store().open().expect("the store is free");
    assert_eq!(memory.stats().unwrap().ledger.turns, 1);
}

/// A compile while another process holds the store writes no vector: the turns that process
/// has not embedded stay lexical candidates, and the compile says why; once the store is free,
/// every turn is still to embed.
#[test]
fn a_compile_while_serve_holds_the_store_embeds_nothing_and_says_so() {
    let (_dir, store, _key, server) = served_store();
    let compile = [
        "compile",
        "--namespace",
        "shared",
        "--query",
        "what was said over HTTP?",
        "--budget",
        "200",
        "--reader-tokenizer",
        "o200k_base",
        "--json",
    ];
    let r = run(&store, &compile);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(names_the_server(&r.stderr, &server), "{}", r.stderr);
    assert!(r.stderr.contains("this compile embeds no turns"), "{}", r.stderr);
    let context: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(context["coverage"]["dense_pending"], 1, "{context}");
    assert!(context["text"].as_str().unwrap().contains("said over HTTP"), "{context}");
    server.stop();
    let embedded = ok(&store, &["embed"]);
    assert!(
        embedded.contains("embedded 1 texts") && embedded.contains("0 already cached"),
        "{embedded}"
    );
}

/// The namespace of the compile-beside-ingest race, above the turns from which a compile writes
/// its lexical index file.
const RACED_TURNS: usize = evicortex::DEFAULT_LEXICAL_FILES_FROM + 16;
const RACED_BATCHES: usize = 12;
const RACED_BATCH: usize = 10;
const RACED_COMPILE: &[&str] = &[
    "compile",
    "--namespace",
    "raced",
    "--query",
    "where was the violin moved?",
    "--budget",
    "300",
    "--reader-tokenizer",
    "o200k_base",
    "--dense",
    "off",
    "--json",
];

/// Turns `from..to` of the raced namespace as a JSONL file in `dir`.
fn raced_turns(dir: &Path, from: usize, to: usize) -> String {
    let lines: String = (from..to)
        .map(|t| {
            let thing = ["violin", "kettle", "atlas", "lamp", "clock"][t % 5];
            let line = json!({"namespace": "raced", "session": format!("s{}", t / 10),
                "turn": t % 10, "role": "user", "time": "2024-04-01T00:00:00Z",
                "text": format!("note {t}: the {thing} was moved to room {}", t * 7 % 101)});
            format!("{line}\n")
        })
        .collect();
    let path = dir.join(format!("turns-{from}.jsonl"));
    fs_err::write(&path, lines).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A compile racing an ingest: lexical compiles, which take no lock and open the store beside
/// its writer, run again and again while `ingest` appends batches to the same namespace, whose
/// lexical index file the compiles write meanwhile. No ingest is refused and no compile fails;
/// after the race `verify` passes with every turn, no temporary file is left, the index file
/// loads, and the next compile equals, byte for byte, the compile of a clean copy of the store
/// (its ledger alone, every derived file built from scratch).
#[test]
fn compiles_racing_ingests_leave_the_store_s_files_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&store, &["ingest", "--no-embed", &raced_turns(dir.path(), 0, RACED_TURNS)]);
    let batches: Vec<String> = (0..RACED_BATCHES)
        .map(|b| {
            let from = RACED_TURNS + b * RACED_BATCH;
            raced_turns(dir.path(), from, from + RACED_BATCH)
        })
        .collect();

    let (ingesting, compiled) = (AtomicBool::new(true), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        let compiler = scope.spawn(|| {
            while ingesting.load(SeqCst) {
                let r = run(&store, RACED_COMPILE);
                assert_eq!(r.code, 0, "a compile beside an ingest: {}", r.stderr);
                compiled.fetch_add(1, SeqCst);
            }
        });
        for (b, batch) in batches.iter().enumerate() {
            let before = compiled.load(SeqCst);
            let r = run(&store, &["ingest", "--no-embed", batch]);
            assert_eq!(r.code, 0, "ingest {b} beside a compile: {}", r.stderr);
            // The next batch waits for a compile that ran beside this one to end, so that every
            // batch races a compile however slow the machine.
            while compiled.load(SeqCst) == before && !compiler.is_finished() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        ingesting.store(false, SeqCst);
        compiler.join().unwrap();
    });
    assert!(compiled.into_inner() >= RACED_BATCHES, "every batch raced a compile");

    let total = RACED_TURNS + RACED_BATCHES * RACED_BATCH;
    let verify = ok(&store, &["verify"]);
    assert!(
        verify.starts_with(&format!("ok: {total} records verified ({total} turns")),
        "{verify}"
    );
    assert_eq!(ok(&store, &["export"]).lines().count(), total, "every turn is kept");
    let context = ok(&store, RACED_COMPILE);
    let index_dir = store.join(evicortex::LEXICAL_INDEX_DIR);
    let names: Vec<String> = fs_err::read_dir(&index_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".bm25")), "no lexical index file: {names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "a temporary file is left: {names:?}");

    let clean = dir.path().join("clean");
    fs_err::create_dir(&clean).unwrap();
    for entry in fs_err::read_dir(&store).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(evicortex::LEDGER_FILE) {
            fs_err::copy(&path, clean.join(&name)).unwrap();
        }
    }
    assert_eq!(context, ok(&clean, RACED_COMPILE), "the raced store compiles another context");
}
