//! Faults of a PostgreSQL store's database under `evicortex serve` and the command line: the
//! connection dropped mid-append and mid-erase, a statement timeout, the database crashed and
//! started again, its disk full, and a failover to a synchronous standby. Each gives a clear
//! error (HTTP 503 or 507, exit 3), leaves nothing half-written, and the same request completes
//! when retried. The first two use the shared test server (EVICORTEX_TEST_POSTGRES_URL); the
//! others start servers of their own with `scripts/postgres`, since they stop or fill them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::postgres_front_ends::{evicortex, ok};
use crate::postgres_shared::{create_key, serve, stop};
use crate::test_db::TestDb;

const NAMESPACE: &str = "faults";
const TURNS: &str = "/v1/namespaces/faults/turns";
const ERASE: &str = "/v1/namespaces/faults/erase";

/// Servers started by `scripts/postgres` for one test, stopped (and their files removed) when
/// dropped.
struct Cluster {
    vars: BTreeMap<String, String>,
    /// The variable naming what `scripts/postgres stop` takes.
    data_var: &'static str,
}

impl Cluster {
    fn start(args: &[&str], data_var: &'static str) -> Cluster {
        let exports = script(args);
        let vars = exports
            .trim()
            .strip_prefix("export ")
            .unwrap_or_else(|| panic!("scripts/postgres {args:?} printed {exports:?}"))
            .split(' ')
            .map(|pair| {
                let (name, value) = pair.split_once('=').expect("NAME=VALUE");
                (name.to_owned(), value.to_owned())
            })
            .collect();
        Cluster { vars, data_var }
    }

    fn var(&self, name: &str) -> &str {
        self.vars.get(name).unwrap_or_else(|| panic!("scripts/postgres printed no {name}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(data) = self.vars.get(self.data_var) {
            let _ = Command::new(script_path()).args(["stop", data]).output();
        }
    }
}

fn script_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres")
}

/// `scripts/postgres args`, which must succeed: its standard output.
fn script(args: &[&str]) -> String {
    let out = Command::new(script_path()).args(args).output().expect("run scripts/postgres");
    assert!(
        out.status.success(),
        "scripts/postgres {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A client of one server under one key.
struct Api {
    base: String,
    key: String,
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Api {
    fn new(base: &str, key: &str) -> Api {
        Api {
            base: base.to_owned(),
            key: key.to_owned(),
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
            client: reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap(),
        }
    }

    /// The status and JSON body of `POST path`.
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let request =
            self.client.post(format!("{}{path}", self.base)).bearer_auth(&self.key).json(body);
        self.runtime.block_on(async {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        })
    }

    /// `POST path` again while it fails with 503 (a pool finds each connection the server
    /// closed on its next use), until it succeeds: its body.
    fn post_until_ok(&self, path: &str, body: &Value) -> Value {
        for _ in 0..20 {
            match self.post(path, body) {
                (200, reply) => return reply,
                (503, _) => std::thread::sleep(Duration::from_millis(100)),
                (status, reply) => panic!("{path}: {status} {reply}"),
            }
        }
        panic!("{path} still failed after 20 tries")
    }
}

/// `count` turns of session `session`, each with a text of about `size` bytes of its own.
fn batch(session: &str, count: u32, size: usize) -> Value {
    let turns: Vec<Value> = (0..count)
        .map(|i| {
            let mut text = format!("{session} turn {i}:");
            let mut word = u64::from(i) * 7919 + session.len() as u64;
            while text.len() < size {
                word = word.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                text.push_str(&format!(" {:x}", word >> 20));
            }
            json!({"session": session, "turn": i, "role": "user", "text": text,
                   "time": "2024-05-02T10:00:00Z"})
        })
        .collect();
    json!({ "turns": turns })
}

/// The sessions the store holds in the namespace, each with its number of turns.
fn sessions(url: &str, derived: &Path) -> BTreeMap<String, usize> {
    let mut export = evicortex(url, derived);
    export.args(["export", "--namespace", NAMESPACE]);
    let mut sessions = BTreeMap::new();
    for line in ok(export).lines() {
        let turn: Value = serde_json::from_str(line).unwrap();
        *sessions.entry(turn["session"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    sessions
}

fn expect_sessions(url: &str, derived: &Path, expected: &[(&str, usize)]) {
    let expected: BTreeMap<String, usize> =
        expected.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect();
    assert_eq!(sessions(url, derived), expected);
}

/// `evicortex verify` passes; the number of erased turns it reports.
fn verify(url: &str, derived: &Path) -> u64 {
    let mut verify = evicortex(url, derived);
    verify.args(["verify", "--json"]);
    let report: Value = serde_json::from_str(&ok(verify)).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    report["erased_turns"].as_u64().unwrap()
}

/// An exclusive lock on the ledger's records, held until dropped: an append or erasure started
/// meanwhile waits for it.
struct RecordsLock(postgres::Client);

impl RecordsLock {
    fn take(url: &str) -> RecordsLock {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        client.batch_execute("BEGIN; LOCK TABLE records IN ACCESS EXCLUSIVE MODE").unwrap();
        RecordsLock(client)
    }

    /// Terminates the backends of `url`'s database that wait for this lock until `done` (the
    /// request that waits for it has returned): their connections drop in the middle of what
    /// they do. A server's own background reads queue for the lock too, before or after the
    /// request's statement; terminating only the first waiters could leave the request waiting.
    fn terminate_waiters_until(&mut self, done: impl Fn() -> bool) {
        let started = Instant::now();
        let mut terminated_any = false;
        while !done() {
            // Inside its transaction the statistics view would show its first snapshot for ever.
            self.0.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
            let terminated: i64 = self
                .0
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity, pg_terminate_backend(pid) \
                     WHERE datname = current_database() AND wait_event_type = 'Lock' \
                     AND pid <> pg_backend_pid()",
                    &[],
                )
                .unwrap()
                .get(0);
            terminated_any |= terminated > 0;
            assert!(started.elapsed() < Duration::from_secs(60), "the request still waits");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(terminated_any, "nothing waited for the lock");
    }
}

impl Drop for RecordsLock {
    fn drop(&mut self) {
        let _ = self.0.batch_execute("ROLLBACK");
    }
}

/// Turns of session `session` as a JSONL file for `evicortex ingest`.
fn jsonl(dir: &Path, session: &str) -> PathBuf {
    let path = dir.join(format!("{session}.jsonl"));
    let lines: Vec<String> = batch(session, 3, 40)["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| {
            let mut turn = turn.clone();
            turn["namespace"] = json!(NAMESPACE);
            turn.to_string()
        })
        .collect();
    fs_err::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// `evicortex ingest` of `file`, as from another machine (a derived directory of its own, so
/// beside a running server): exit code and standard error.
fn ingest(url: &str, file: &Path) -> (i32, String) {
    let derived = tempfile::tempdir().unwrap();
    let mut ingest = evicortex(url, derived.path());
    ingest.args(["ingest", "--no-embed", file.to_str().unwrap()]);
    let out = ingest.output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn assert_unavailable(what: &str, (status, body): (u16, Value), cause: &str) {
    let error = body["error"].as_str().unwrap_or_default();
    assert_eq!(status, 503, "{what}: {body}");
    assert!(error.contains("PostgreSQL") && error.contains(cause), "{what}: {body}");
}

#[test]
fn a_connection_dropped_mid_append_or_mid_erase_is_503_stores_nothing_half_and_the_retry_completes()
{
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let key = create_key(&db.url, derived.path(), NAMESPACE);
    let (server, base) = serve(&db.url, derived.path());
    let api = Api::new(&base, &key);
    assert_eq!(api.post(TURNS, &batch("first", 3, 40)).0, 200);

    let mut lock = RecordsLock::take(&db.url);
    let appended = std::thread::scope(|scope| {
        let append = scope.spawn(|| Api::new(&base, &key).post(TURNS, &batch("second", 3, 40)));
        lock.terminate_waiters_until(|| append.is_finished());
        append.join().unwrap()
    });
    drop(lock);
    // The client sees the server's notice or only the closed socket, depending on timing.
    assert_unavailable("append", appended, "connection");
    expect_sessions(&db.url, derived.path(), &[("first", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);
    assert_eq!(api.post_until_ok(TURNS, &batch("second", 3, 40))["appended"], 3);

    let mut lock = RecordsLock::take(&db.url);
    let erased = std::thread::scope(|scope| {
        let erase = scope.spawn(|| Api::new(&base, &key).post(ERASE, &json!({"session": "first"})));
        lock.terminate_waiters_until(|| erase.is_finished());
        erase.join().unwrap()
    });
    drop(lock);
    assert_unavailable("erase", erased, "connection");
    expect_sessions(&db.url, derived.path(), &[("first", 3), ("second", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);
    let erased = api.post_until_ok(ERASE, &json!({"session": "first"}));
    assert_eq!(erased["erased"].as_array().map(Vec::len), Some(3), "{erased}");
    expect_sessions(&db.url, derived.path(), &[("second", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 3);
    stop(server);

    // The command line: exit 3 naming the dropped connection, nothing stored, then the same
    // ingest completes.
    let file = jsonl(derived.path(), "third");
    let mut lock = RecordsLock::take(&db.url);
    let (code, stderr) = std::thread::scope(|scope| {
        let run = scope.spawn(|| ingest(&db.url, &file));
        lock.terminate_waiters_until(|| run.is_finished());
        run.join().unwrap()
    });
    drop(lock);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("PostgreSQL") && stderr.contains("connection"), "{stderr}");
    expect_sessions(&db.url, derived.path(), &[("second", 3)]);
    assert_eq!(ingest(&db.url, &file).0, 0);
    expect_sessions(&db.url, derived.path(), &[("second", 3), ("third", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 3);
}

#[test]
fn a_statement_timeout_is_503_over_http_and_exit_3_on_the_command_line_and_the_retry_completes() {
    let db = TestDb::new();
    // What an operator sets to bound every statement; the server's sessions start with it.
    postgres::Client::connect(&db.url, postgres::NoTls)
        .unwrap()
        .batch_execute(&format!("ALTER DATABASE {} SET statement_timeout = '1s'", db.name()))
        .unwrap();
    let derived = tempfile::tempdir().unwrap();
    let key = create_key(&db.url, derived.path(), NAMESPACE);
    let (server, base) = serve(&db.url, derived.path());
    let api = Api::new(&base, &key);
    assert_eq!(api.post(TURNS, &batch("first", 3, 40)).0, 200);

    let file = jsonl(derived.path(), "third");
    let lock = RecordsLock::take(&db.url);
    assert_unavailable("append", api.post(TURNS, &batch("second", 3, 40)), "statement timeout");
    let (code, stderr) = ingest(&db.url, &file);
    drop(lock);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("statement timeout"), "{stderr}");
    expect_sessions(&db.url, derived.path(), &[("first", 3)]);
    assert_eq!(api.post_until_ok(TURNS, &batch("second", 3, 40))["appended"], 3);
    assert_eq!(ingest(&db.url, &file).0, 0);
    expect_sessions(&db.url, derived.path(), &[("first", 3), ("second", 3), ("third", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);
    stop(server);
}

#[test]
fn a_database_crash_and_restart_under_serve_is_503_while_it_is_down_and_loses_nothing_acknowledged()
{
    let cluster = Cluster::start(&["start"], "EVICORTEX_TEST_POSTGRES_DATA");
    let db = TestDb::on(cluster.var("EVICORTEX_TEST_POSTGRES_URL"), None);
    let data = cluster.var("EVICORTEX_TEST_POSTGRES_DATA");
    let derived = tempfile::tempdir().unwrap();
    let key = create_key(&db.url, derived.path(), NAMESPACE);
    let (server, base) = serve(&db.url, derived.path());
    let api = Api::new(&base, &key);
    assert_eq!(api.post(TURNS, &batch("before", 3, 40)).0, 200);

    script(&["crash", data]);
    for _ in 0..3 {
        let (status, body) = api.post(TURNS, &batch("during", 3, 40));
        assert_eq!(status, 503, "{body}");
        assert!(body["error"].as_str().unwrap_or_default().contains("PostgreSQL"), "{body}");
    }
    script(&["restart", data]);
    assert_eq!(api.post_until_ok(TURNS, &batch("during", 3, 40))["appended"], 3);
    assert_eq!(api.post_until_ok(TURNS, &batch("after", 3, 40))["appended"], 3);
    stop(server);
    expect_sessions(&db.url, derived.path(), &[("after", 3), ("before", 3), ("during", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);
}

/// Fills the database's tablespace until a write fails for want of space; the filler is
/// dropped by [`free_space`].
fn fill_disk(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    // Stored as it is (no compression), so each row takes the space it says.
    client
        .batch_execute(
            "CREATE TABLE filler (a text); ALTER TABLE filler ALTER a SET STORAGE EXTERNAL",
        )
        .unwrap();
    for chunks in [16_384, 256, 16] {
        // Rows of `chunks` x 32 hex digits, until one does not fit.
        loop {
            let row = client.execute(
                "INSERT INTO filler SELECT string_agg(md5(random()::text), '') \
                 FROM generate_series(1, $1)",
                &[&chunks],
            );
            match row {
                Ok(_) => continue,
                Err(e) if e.code() == Some(&postgres::error::SqlState::DISK_FULL) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
}

fn free_space(url: &str) {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap()
        .batch_execute("DROP TABLE filler")
        .unwrap();
}

#[test]
fn a_full_database_disk_is_507_and_exit_3_reads_still_answer_and_the_batch_is_taken_once_space_is_free()
 {
    // 24 MiB: the new database (about 8 MiB) and the ledger's tables fit, then the filler.
    let cluster = Cluster::start(&["start-small-disk", "24576"], "EVICORTEX_TEST_POSTGRES_DATA");
    let db = TestDb::on(cluster.var("EVICORTEX_TEST_POSTGRES_URL"), Some("small"));
    let derived = tempfile::tempdir().unwrap();
    let key = create_key(&db.url, derived.path(), NAMESPACE);
    let (server, base) = serve(&db.url, derived.path());
    let api = Api::new(&base, &key);
    assert_eq!(api.post(TURNS, &batch("before", 3, 40)).0, 200);

    fill_disk(&db.url);
    // Larger than any free space left in the pages the ledger already has.
    let big = batch("big", 200, 1_000);
    let (status, body) = api.post(TURNS, &big);
    assert_eq!(status, 507, "{body}");
    assert!(body["error"].as_str().unwrap_or_default().contains("No space left"), "{body}");
    let file = jsonl(derived.path(), "third");
    let (code, stderr) = ingest(&db.url, &file);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("No space left"), "{stderr}");
    let stats = Api::new(&base, &key);
    let request =
        stats.client.get(format!("{base}/v1/namespaces/{NAMESPACE}/stats")).bearer_auth(&key);
    let status = stats.runtime.block_on(async { request.send().await.unwrap().status() });
    assert_eq!(status.as_u16(), 200, "reads answer while the disk is full");
    expect_sessions(&db.url, derived.path(), &[("before", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);

    free_space(&db.url);
    assert_eq!(api.post(TURNS, &big).1["appended"], 200);
    assert_eq!(ingest(&db.url, &file).0, 0);
    stop(server);
    expect_sessions(&db.url, derived.path(), &[("before", 3), ("big", 200), ("third", 3)]);
    assert_eq!(verify(&db.url, derived.path()), 0);
}

/// Appends batches of 3 turns, one after another, until `stop` is set: the sessions of those
/// acknowledged (200) and of those refused (503; any other status fails the test).
fn append_until(
    api: &Api,
    prefix: &str,
    stop: &std::sync::atomic::AtomicBool,
) -> (Vec<String>, Vec<String>) {
    let (mut acknowledged, mut refused) = (Vec::new(), Vec::new());
    for n in 0.. {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let session = format!("{prefix}{n:04}");
        match api.post(TURNS, &batch(&session, 3, 40)) {
            (200, _) => acknowledged.push(session),
            (503, _) => {
                refused.push(session);
                std::thread::sleep(Duration::from_millis(50));
            }
            (status, body) => panic!("append {session}: {status} {body}"),
        }
    }
    (acknowledged, refused)
}

#[test]
fn a_failover_to_a_synchronous_standby_loses_no_acknowledged_append_and_a_server_on_it_carries_on()
{
    let pair =
        Cluster::start(&["start-replicated", "synchronous"], "EVICORTEX_TEST_POSTGRES_PAIR_DATA");
    let db = TestDb::on(pair.var("EVICORTEX_TEST_POSTGRES_PRIMARY_URL"), None);
    let standby = pair.var("EVICORTEX_TEST_POSTGRES_REPLICA_URL");
    let standby_url = format!("{}/{}", standby.rsplit_once('/').unwrap().0, db.name());
    let pair_data = pair.var("EVICORTEX_TEST_POSTGRES_PAIR_DATA");
    let (derived_a, derived_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let key = create_key(&db.url, derived_a.path(), NAMESPACE);
    let (server_a, base_a) = serve(&db.url, derived_a.path());

    let stop_appending = std::sync::atomic::AtomicBool::new(false);
    let (acknowledged, refused) = std::thread::scope(|scope| {
        let appender = scope.spawn(|| append_until(&Api::new(&base_a, &key), "a", &stop_appending));
        std::thread::sleep(Duration::from_secs(2));
        // The primary dies in the middle of the appends; the standby takes over.
        script(&["crash", &format!("{pair_data}/primary")]);
        std::thread::sleep(Duration::from_secs(1));
        script(&["promote", pair_data]);
        std::thread::sleep(Duration::from_secs(1));
        stop_appending.store(true, std::sync::atomic::Ordering::Relaxed);
        appender.join().unwrap()
    });
    assert!(acknowledged.len() >= 5, "only {} appends before the crash", acknowledged.len());
    assert!(!refused.is_empty(), "no append was refused after the crash");
    // Server A still points at the dead primary: it refuses with 503, and is replaced by one
    // pointed at the new primary (the same key works: keys live in the database).
    assert_unavailable(
        "append to the old primary",
        Api::new(&base_a, &key).post(TURNS, &batch("late", 3, 40)),
        "",
    );
    stop(server_a);
    let (server_b, base_b) = serve(&standby_url, derived_b.path());
    let api_b = Api::new(&base_b, &key);
    for session in &refused {
        api_b.post_until_ok(TURNS, &batch(session, 3, 40));
    }
    assert_eq!(api_b.post(TURNS, &batch("b", 3, 40)).0, 200);
    stop(server_b);

    let stored = sessions(&standby_url, derived_b.path());
    for session in acknowledged.iter().chain(&refused).chain(std::iter::once(&"b".to_owned())) {
        assert_eq!(stored.get(session), Some(&3), "session {session} after the failover");
    }
    assert_eq!(stored.len(), acknowledged.len() + refused.len() + 1, "{stored:?}");
    assert_eq!(verify(&standby_url, derived_b.path()), 0);
}
