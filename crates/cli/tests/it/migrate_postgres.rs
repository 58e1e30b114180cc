//! `evicortex migrate --from DIR --to postgres://...`: the embedded ledger copied record for
//! record, both sides verified alike, and the URL then served as a store. Needs a server:
//! `scripts/postgres start`, then export the URL it prints as EVICORTEX_TEST_POSTGRES_URL.

use std::path::Path;

use crate::cli::{command, ok, run, sample};

/// A database of its own on the test server, dropped at the end.
pub(crate) struct TestDb {
    pub(crate) url: String,
    name: String,
    server: String,
}

impl TestDb {
    pub(crate) fn new() -> TestDb {
        let server = std::env::var("EVICORTEX_TEST_POSTGRES_URL").unwrap_or_else(|_| {
            panic!(
                "EVICORTEX_TEST_POSTGRES_URL is not set: this test needs a PostgreSQL server. \
                 Run `scripts/postgres start` and export the URL it prints"
            )
        });
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("evicortex_cli_{}_{next}_{nanos}", std::process::id());
        let mut admin = postgres::Client::connect(&server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test server: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        let (base, query) = server.split_once('?').map_or((&server[..], ""), |(b, q)| (b, q));
        let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
        let url = if query.is_empty() {
            format!("{base}/{name}")
        } else {
            format!("{base}/{name}?{query}")
        };
        TestDb { url, name, server }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ =
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// `evicortex --store URL args`, its derived files in `derived`.
fn ok_url(url: &str, derived: &Path, args: &[&str]) -> String {
    let out = command(Path::new(url), args).env("EVICORTEX_DERIVED_DIR", derived).output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "evicortex --store URL {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn an_embedded_store_moves_to_postgres_and_both_verify_alike() {
    let db = TestDb::new();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&store, &["ingest", "--no-embed", sample().to_str().unwrap()]);
    ok(&store, &["erase", "--namespace", "alice", "--record", "2"]);
    let mut embedded: serde_json::Value =
        serde_json::from_str(&ok(&store, &["verify", "--json"])).unwrap();
    assert_eq!(embedded.as_object_mut().unwrap().remove("ok"), Some(serde_json::json!(true)));

    let from = store.to_str().unwrap();
    let out = ok(dir.path(), &["migrate", "--from", from, "--to", &db.url, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["embedded"], embedded, "{out}");
    assert_eq!(report["postgres"], embedded, "{out}");

    let derived = dir.path().join("derived");
    let served: serde_json::Value =
        serde_json::from_str(&ok_url(&db.url, &derived, &["verify", "--json"])).unwrap();
    assert_eq!(served["chain_head"], embedded["chain_head"]);
    assert_eq!(served["erased_turns"].as_u64(), Some(1));
    let exported = ok_url(&db.url, &derived, &["export", "--namespace", "alice"]);
    assert!(exported.contains("Lisbon office"), "{exported}");

    // A second copy into the same, now non-empty, ledger is refused and changes nothing.
    let again = run(dir.path(), &["migrate", "--from", from, "--to", &db.url]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("is not empty"), "{}", again.stderr);
    let after: serde_json::Value =
        serde_json::from_str(&ok_url(&db.url, &derived, &["verify", "--json"])).unwrap();
    assert_eq!(after, served);
}
