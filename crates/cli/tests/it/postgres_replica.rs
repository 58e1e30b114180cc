//! `evicortex --store postgres://<hot standby>`: verify, export and compile read what the
//! standby has replayed; ingest and erase exit with the refusal code naming the replica. Needs
//! the pair `scripts/postgres start-replicated` prints.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use crate::cli::{command, sample};

/// A database of its own on the pair's primary (dropped there, and on the standby by replay).
struct PairDb {
    primary_server: String,
    replica_server: String,
    name: String,
}

impl PairDb {
    fn new() -> PairDb {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: this test needs a primary and a hot standby. Run \
                     `scripts/postgres start-replicated` and export what it prints"
                )
            })
        };
        let primary_server = var("EVICORTEX_TEST_POSTGRES_PRIMARY_URL");
        let replica_server = var("EVICORTEX_TEST_POSTGRES_REPLICA_URL");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("evicortex_cli_replica_{}_{nanos}", std::process::id());
        postgres::Client::connect(&primary_server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the primary {primary_server}: {e}"))
            .batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        PairDb { primary_server, replica_server, name }
    }

    fn url(&self, server: &str) -> String {
        let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
        format!("{base}/{}", self.name)
    }

    /// Waits until the standby has replayed everything the primary has written so far.
    fn wait_for_replay(&self) {
        let mut primary = postgres::Client::connect(&self.primary_server, postgres::NoTls).unwrap();
        let written: String =
            primary.query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
        let mut standby = postgres::Client::connect(&self.replica_server, postgres::NoTls).unwrap();
        let started = Instant::now();
        while !standby
            .query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&written])
            .unwrap()
            .get::<_, bool>(0)
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the standby {} has not replayed up to {written} in 30 s",
                self.replica_server
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PairDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.primary_server, postgres::NoTls) {
            let _ =
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// `evicortex --store URL args` with its derived files in `derived`: (exit code, stdout, stderr).
fn run_url(url: &str, derived: &Path, args: &[&str]) -> (i32, String, String) {
    let out = command(Path::new(url), args).env("EVICORTEX_DERIVED_DIR", derived).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (out.status.code().expect("exited normally"), text(out.stdout), text(out.stderr))
}

fn ok_url(url: &str, derived: &Path, args: &[&str]) -> String {
    let (code, stdout, stderr) = run_url(url, derived, args);
    assert_eq!(code, 0, "evicortex --store {url} {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

const COMPILE: &[&str] = &[
    "compile",
    "--namespace",
    "alice",
    "--reader-tokenizer",
    "o200k_base",
    "--dense",
    "off",
    "--query",
    "What is my dog's name?",
    "--budget",
    "150",
    "--json",
];

#[test]
fn a_replica_store_reads_what_the_primary_wrote_and_refuses_ingest_and_erase() {
    let db = PairDb::new();
    let (primary, replica) = (db.url(&db.primary_server), db.url(&db.replica_server));
    let dir = tempfile::tempdir().unwrap();
    let (on_primary, on_replica) = (dir.path().join("primary"), dir.path().join("replica"));
    ok_url(&primary, &on_primary, &["ingest", "--no-embed", sample().to_str().unwrap()]);
    db.wait_for_replay();

    let verify = |url: &str, derived: &Path| -> serde_json::Value {
        serde_json::from_str(&ok_url(url, derived, &["verify", "--json"])).unwrap()
    };
    assert_eq!(verify(&replica, &on_replica), verify(&primary, &on_primary));
    let export = ["export", "--namespace", "alice"];
    assert_eq!(ok_url(&replica, &on_replica, &export), ok_url(&primary, &on_primary, &export));
    let compiled = |url: &str, derived: &Path| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&ok_url(url, derived, COMPILE)).unwrap()["items"]
            .clone()
    };
    let items = compiled(&primary, &on_primary);
    assert!(items.as_array().is_some_and(|i| !i.is_empty()), "{items}");
    assert_eq!(compiled(&replica, &on_replica), items);

    let server =
        db.replica_server.rsplit_once('@').unwrap().1.split('/').next().unwrap().to_owned();
    let new_turn = dir.path().join("new.jsonl");
    fs_err::write(
        &new_turn,
        r#"{"namespace":"alice","session":"later","turn":0,"role":"user","text":"Only the primary may store this.","time":"2024-05-01T10:00:00Z"}"#,
    )
    .unwrap();
    for args in [
        vec!["ingest", "--no-embed", new_turn.to_str().unwrap()],
        vec!["erase", "--namespace", "alice", "--record", "2"],
    ] {
        let (code, stdout, stderr) = run_url(&replica, &on_replica, &args);
        assert_eq!(code, 2, "{args:?}:\n{stdout}\n{stderr}");
        assert!(stderr.contains(&server) && stderr.contains("go to the primary"), "{stderr}");
    }
    db.wait_for_replay();
    assert_eq!(verify(&replica, &on_replica), verify(&primary, &on_primary));
}
