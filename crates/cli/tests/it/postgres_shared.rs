//! Several servers over one PostgreSQL database, each with a derived directory of its own (as
//! on machines of their own): what one derives, the others find in the database. Needs a
//! server: `scripts/postgres start`, then export the URL it prints as
//! EVICORTEX_TEST_POSTGRES_URL.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::cli::{sigterm, spawn_serve};
use crate::postgres_front_ends::{evicortex, ok};
use crate::test_db::TestDb;

pub(crate) fn create_key(url: &str, derived: &Path, namespace: &str) -> String {
    let mut keys = evicortex(url, derived);
    keys.args(["keys", "create", "--namespace", namespace]);
    let key = ok(keys).lines().last().expect("a key").trim().to_owned();
    assert!(key.starts_with("evk_"), "{key}");
    key
}

/// A lexical-only server on `url` with its derived files in `derived`.
pub(crate) fn serve(url: &str, derived: &Path) -> (Running, String) {
    let mut serve = evicortex(url, derived);
    serve.args(["serve", "--listen", "127.0.0.1:0", "--lexical-only"]).stderr(Stdio::null());
    let (child, base) = spawn_serve(serve);
    (Running(Some(child)), base)
}

/// The status of `GET base/path` under `key`.
fn status(base: &str, path: &str, key: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let request = client.get(format!("{base}{path}")).bearer_auth(key);
    runtime.block_on(async { request.send().await.expect("request").status().as_u16() })
}

/// A server process, killed if a failed assertion leaves it running.
pub(crate) struct Running(Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn stop(mut server: Running) {
    let mut child = server.0.take().expect("a running server");
    sigterm(&child);
    let exit = child.wait().expect("wait for the server");
    assert!(exit.success(), "server exit after SIGTERM: {exit}");
}

#[test]
fn a_key_made_through_one_process_works_on_every_server_and_a_revocation_reaches_them_all() {
    let db = TestDb::new();
    let (cli, a, b) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let key = create_key(&db.url, cli.path(), "alice");
    let (server_a, base_a) = serve(&db.url, a.path());
    let (server_b, base_b) = serve(&db.url, b.path());
    // A key made after both servers started is found too: nothing is cached per process.
    let late = create_key(&db.url, a.path(), "bob");
    for base in [&base_a, &base_b] {
        assert_eq!(status(base, "/v1/namespaces/alice/stats", &key), 200, "{base}");
        assert_eq!(status(base, "/v1/namespaces/bob/stats", &late), 200, "{base}");
        assert_eq!(status(base, "/v1/namespaces/bob/stats", &key), 403, "{base}");
    }
    for dir in [cli.path(), a.path(), b.path()] {
        assert!(!dir.join("keys.sqlite").exists(), "a key file in {}", dir.display());
    }

    let mut list = evicortex(&db.url, b.path());
    list.args(["keys", "list"]);
    let listed = ok(list);
    let key_id = listed
        .lines()
        .find(|line| line.ends_with("alice"))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or_else(|| panic!("alice's key is not listed:\n{listed}"))
        .to_owned();
    let mut revoke = evicortex(&db.url, b.path());
    revoke.args(["keys", "revoke", &key_id]);
    ok(revoke);
    for base in [&base_a, &base_b] {
        assert_eq!(status(base, "/v1/namespaces/alice/stats", &key), 401, "{base}");
        assert_eq!(status(base, "/v1/namespaces/bob/stats", &late), 200, "{base}");
    }
    stop(server_a);
    stop(server_b);
}

#[test]
fn keys_an_earlier_version_kept_in_a_derived_directory_move_into_the_database() {
    let db = TestDb::new();
    // An embedded store's key file has the format an earlier version kept per machine.
    let embedded = tempfile::tempdir().unwrap();
    let mut made = Command::new(env!("CARGO_BIN_EXE_evicortex"));
    made.arg("--store").arg(embedded.path()).args(["keys", "create", "--namespace", "carol"]);
    let key = ok(made).lines().last().expect("a key").trim().to_owned();

    let (old, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut claim = evicortex(&db.url, old.path());
    claim.args(["keys", "list"]);
    ok(claim);
    fs_err::copy(embedded.path().join("keys.sqlite"), old.path().join("keys.sqlite")).unwrap();

    let (server, base) = serve(&db.url, old.path());
    assert!(!old.path().join("keys.sqlite").exists(), "the key file was left");
    let (server_b, base_b) = serve(&db.url, other.path());
    assert_eq!(status(&base, "/v1/namespaces/carol/stats", &key), 200);
    assert_eq!(status(&base_b, "/v1/namespaces/carol/stats", &key), 200);
    stop(server);
    stop(server_b);
}

/// `evicortex --store URL args` with the derived files in `derived`, successful: its stdout.
fn run_ok(url: &str, derived: &Path, args: &[&str]) -> String {
    let mut command = evicortex(url, derived);
    command.args(args);
    ok(command)
}

#[test]
fn the_encoder_list_and_overlength_policy_set_through_one_machine_hold_on_another() {
    let db = TestDb::new();
    let (a, b, old) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // An earlier version's list in a derived directory moves into the database when read there.
    run_ok(&db.url, old.path(), &["keys", "list"]);
    let listed = r#"{"format": "evicortex-encoders/1", "encoders": ["all-minilm-l6-v2", "all-mpnet-base-v2"]}"#;
    fs_err::write(old.path().join("encoders.json"), listed).unwrap();
    let both = r#"{"encoders":["all-minilm-l6-v2","all-mpnet-base-v2"]}"#;
    assert_eq!(run_ok(&db.url, old.path(), &["encoders", "--json"]).trim(), both);
    assert!(!old.path().join("encoders.json").exists(), "the list was left in the directory");
    assert_eq!(run_ok(&db.url, b.path(), &["encoders", "--json"]).trim(), both);

    run_ok(&db.url, a.path(), &["encoders", "--set", "all-minilm-l6-v2"]);
    assert!(!a.path().join("encoders.json").exists(), "the list was written to the directory");
    let one = r#"{"encoders":["all-minilm-l6-v2"]}"#;
    for dir in [&a, &b, &old] {
        assert_eq!(run_ok(&db.url, dir.path(), &["encoders", "--json"]).trim(), one);
    }

    // Embedded through A with windows: B, which has no local cache, embeds with windows too
    // (under the default policy the long turn would be refused, exit code 2).
    let input = a.path().join("long.jsonl");
    let text = "The harbour ferry timetable changes every season, and the evening boats stop \
                early. "
        .repeat(30);
    let turn = serde_json::json!({"namespace": "alice", "session": "s1", "turn": 0,
        "role": "user", "text": text, "time": "2024-05-20T09:00:00Z"});
    fs_err::write(&input, format!("{turn}\n")).unwrap();
    run_ok(&db.url, a.path(), &["ingest", "--overlength", "window", input.to_str().unwrap()]);
    let embedded = run_ok(&db.url, b.path(), &["embed"]);
    assert!(embedded.contains(" 0 refused as overlength"), "{embedded}");
}

/// `POST base/path` with `body` under `key`: the JSON answer of a success.
fn post(base: &str, path: &str, key: &str, body: &serde_json::Value) -> serde_json::Value {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let request = client.post(format!("{base}{path}")).bearer_auth(key).json(body);
    runtime.block_on(async {
        let response = request.send().await.expect("request");
        let status = response.status();
        let body: serde_json::Value = response.json().await.expect("json body");
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    })
}

/// The vectors (rows) in the embedding cache of the database `url` (none before a process made
/// the table).
pub(crate) fn cached_vectors(url: &str) -> i64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let made: bool = client
        .query_one("SELECT to_regclass('embedding_vectors') IS NOT NULL", &[])
        .expect("look for the table")
        .get(0);
    if !made {
        return 0;
    }
    client.query_one("SELECT count(*) FROM embedding_vectors", &[]).expect("count vectors").get(0)
}

fn hybrid_server(url: &str, derived: &Path) -> (Running, String) {
    let mut serve = evicortex(url, derived);
    serve.args(["serve", "--listen", "127.0.0.1:0"]).stderr(Stdio::inherit());
    let (child, base) = spawn_serve(serve);
    (Running(Some(child)), base)
}

#[test]
fn an_erasure_through_one_server_reaches_the_next_compile_and_the_files_of_another() {
    let data = std::env::var_os("EVICORTEX_TEST_POSTGRES_DATA").map(std::path::PathBuf::from);
    let data = data.unwrap_or_else(|| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_DATA is not set: this test reads the test server's files \
             back. Run `scripts/postgres start` and export the variables it prints"
        )
    });
    let db = TestDb::new();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let secret = format!("erasure-probe {nanos}-{} my locker PIN is 4711", std::process::id());
    let inputs = tempfile::tempdir().unwrap();
    let input = inputs.path().join("turns.jsonl");
    let lines: Vec<String> = [
        ("s1", "My sister Ana lives in Porto and teaches the cello."),
        ("s2", secret.as_str()),
        ("s3", "The ferry to the island leaves at nine on Sundays."),
    ]
    .iter()
    .map(|(session, text)| {
        serde_json::json!({"namespace": "alice", "session": session, "turn": 0, "role": "user",
            "text": text, "time": "2024-05-20T09:00:00Z"})
        .to_string()
    })
    .collect();
    fs_err::write(&input, lines.join("\n") + "\n").unwrap();
    // The first machine embeds into the database's cache; the second finds every vector there.
    run_ok(&db.url, a.path(), &["ingest", input.to_str().unwrap()]);
    fs_err::remove_file(&input).unwrap();
    let embedded = run_ok(&db.url, b.path(), &["embed"]);
    assert!(embedded.starts_with("embedded 0 texts"), "{embedded}");
    assert_eq!(cached_vectors(&db.url), 3);
    let key = create_key(&db.url, a.path(), "alice");
    let (server_a, base_a) = hybrid_server(&db.url, a.path());
    let (server_b, base_b) = hybrid_server(&db.url, b.path());

    let ask = serde_json::json!({"query": "What is my locker PIN?", "budget": 300,
        "reader_tokenizer": "o200k_base"});
    let compile = "/v1/namespaces/alice/compile";
    let before = post(&base_b, compile, &key, &ask);
    assert!(before["text"].as_str().unwrap().contains(&secret), "{before}");
    assert!(post(&base_a, compile, &key, &ask)["text"].as_str().unwrap().contains(&secret));

    let erased =
        post(&base_a, "/v1/namespaces/alice/erase", &key, &serde_json::json!({"session": "s2"}));
    assert_eq!(erased["erased"].as_array().map(Vec::len), Some(1), "{erased}");
    let after = post(&base_b, compile, &key, &ask);
    assert!(!after["text"].as_str().unwrap().contains(&secret), "B cited the erased turn: {after}");
    // A's erasure dropped the erased turn's vector from the database's cache.
    assert_eq!(cached_vectors(&db.url), 2);
    for dir in [a.path(), b.path(), data.as_path()] {
        let left = crate::files_holding::files_holding(dir, secret.as_bytes());
        assert!(left.is_empty(), "the erased text is still in {left:?}");
    }
    stop(server_a);
    stop(server_b);
    let report: serde_json::Value =
        serde_json::from_str(&run_ok(&db.url, b.path(), &["verify", "--json"])).unwrap();
    assert_eq!((report["ok"].clone(), report["erased_turns"].clone()), (true.into(), 1.into()));
}
