//! `evicortex migrate --from DIR --to postgres://...`: the embedded ledger copied record for
//! record, both sides verified alike, and the URL then served as a store. Needs a server:
//! `scripts/postgres start`, then export the URL it prints as EVICORTEX_TEST_POSTGRES_URL.

use std::path::Path;

use crate::cli::{Run, command, finish, ok, sample};
use crate::test_db::TestDb;

/// `evicortex --store URL args`, its derived files in `derived`.
pub(crate) fn ok_url(url: &str, derived: &Path, args: &[&str]) -> String {
    let out = command(Path::new(url), args).env("EVICORTEX_DERIVED_DIR", derived).output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "evicortex --store URL {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// `evicortex migrate --from FROM --to URL ARGS`, the database's derived files in `derived`.
pub(crate) fn migrate(from: &Path, url: &str, derived: &Path, args: &[&str]) -> Run {
    let elsewhere = from.parent().unwrap();
    let mut all = vec!["migrate", "--from", from.to_str().unwrap(), "--to", url];
    all.extend_from_slice(args);
    let mut cmd = command(elsewhere, &all);
    cmd.env("EVICORTEX_DERIVED_DIR", derived);
    finish(cmd)
}

/// [`migrate`], asserting success and returning stdout.
#[track_caller]
fn migrated(from: &Path, url: &str, derived: &Path, args: &[&str]) -> String {
    let r = migrate(from, url, derived, args);
    assert_eq!(r.code, 0, "migrate failed:\n{}\n{}", r.stdout, r.stderr);
    r.stdout
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

    let derived = dir.path().join("derived");
    let out = migrated(&store, &db.url, &derived, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["embedded"], embedded, "{out}");
    assert_eq!(report["postgres"], embedded, "{out}");

    let served: serde_json::Value =
        serde_json::from_str(&ok_url(&db.url, &derived, &["verify", "--json"])).unwrap();
    assert_eq!(served["chain_head"], embedded["chain_head"]);
    assert_eq!(served["erased_turns"].as_u64(), Some(1));
    let exported = ok_url(&db.url, &derived, &["export", "--namespace", "alice"]);
    assert!(exported.contains("Lisbon office"), "{exported}");

    // A second copy into the same, now non-empty, ledger is refused and changes nothing.
    let again = migrate(&store, &db.url, &derived, &[]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("is not empty"), "{}", again.stderr);
    let after: serde_json::Value =
        serde_json::from_str(&ok_url(&db.url, &derived, &["verify", "--json"])).unwrap();
    assert_eq!(after, served);
}

#[test]
fn a_migration_carries_the_embedding_cache_so_nothing_is_embedded_again() {
    let db = TestDb::new();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // One turn longer than the encoder's 256 tokens, embedded as windows: the policy the
    // embedded store was embedded with must serve the database too.
    let long = dir.path().join("long.jsonl");
    let text =
        "The harbour ferry timetable changes every season, and the evening boats stop early. "
            .repeat(30);
    let turn = serde_json::json!({"namespace": "alice", "session": "s9", "turn": 0,
        "role": "user", "text": text, "time": "2024-05-20T09:00:00Z"});
    fs_err::write(&long, format!("{turn}\n")).unwrap();
    let sample = sample();
    ok(&store, &["ingest", "--overlength", "window", sample.to_str().unwrap()]);
    ok(&store, &["ingest", "--overlength", "window", long.to_str().unwrap()]);
    ok(&store, &["encoders", "--set", "all-minilm-l6-v2"]);

    let derived = dir.path().join("derived");
    let stdout = migrated(&store, &db.url, &derived, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["embedding_cache"], "copied", "{stdout}");
    assert_eq!(report["encoders"], "copied", "{stdout}");
    assert_eq!(report["derived_dir"], derived.to_str().unwrap(), "{stdout}");

    let embedded = ok_url(&db.url, &derived, &["embed"]);
    assert!(embedded.starts_with("embedded 0 texts"), "{embedded}");
    assert!(embedded.contains(" 0 refused as overlength"), "{embedded}");
    let encoders = ok_url(&db.url, &derived, &["encoders"]);
    assert_eq!(encoders, ok(&store, &["encoders"]));
    let ask = [
        "compile",
        "--namespace",
        "alice",
        "--query",
        "When do the evening ferries stop?",
        "--budget",
        "1000",
        "--reader-tokenizer",
        "o200k_base",
    ];
    let on_postgres = ok_url(&db.url, &derived, &ask);
    assert_eq!(on_postgres, ok(&store, &ask));
    // The long turn's windows serve the database's dense list: it ranks first there too.
    let json = [&ask[..], &["--json"]].concat();
    let compiled: serde_json::Value =
        serde_json::from_str(&ok_url(&db.url, &derived, &json)).unwrap();
    let long_turn = compiled["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .chain(compiled["items"].as_array().unwrap())
        .find(|item| item["record"] == 21)
        .unwrap_or_else(|| panic!("record 21 is neither packed nor excluded: {compiled}"));
    assert_eq!(long_turn["dense"]["rank"], 1, "{compiled}");
}

/// `dir/store`: the sample ingested and embedded.
fn embedded_sample(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    ok(&store, &["ingest", "--no-embed", sample().to_str().unwrap()]);
    ok(&store, &["embed"]);
    store
}

/// A cache file an earlier version kept in the database's derived directory is moved into the
/// database by the next open: nothing is embedded again, and the file is gone.
#[test]
fn an_old_cache_file_in_the_derived_directory_is_moved_into_the_database() {
    let db = TestDb::new();
    let dir = tempfile::tempdir().unwrap();
    let store = embedded_sample(dir.path());
    let derived = dir.path().join("derived");
    ok_url(&db.url, &derived, &["stats"]);
    let stdout = migrated(&store, &db.url, &derived, &[]);
    assert!(stdout.contains("embedding cache: copied to the database"), "{stdout}");
    assert!(stdout.contains("encoder list: none in"), "{stdout}");
    let copied = crate::postgres_shared::cached_vectors(&db.url);
    assert!(copied > 0);
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    client.batch_execute("DELETE FROM embedding_vectors").unwrap();
    // The derived directory holds the cache file an earlier version carried there.
    let placed = derived.join("embeddings.sqlite");
    fs_err::copy(store.join("embeddings.sqlite"), &placed).unwrap();

    let embedded = ok_url(&db.url, &derived, &["embed"]);
    assert!(embedded.starts_with("embedded 0 texts"), "{embedded}");
    assert!(!placed.exists(), "the cache file is still in the derived directory");
    assert_eq!(crate::postgres_shared::cached_vectors(&db.url), copied);
}

/// A migration of an earlier version killed while it carried the embedding cache left its
/// temporary copy (the vectors) in the database's derived directory, and a second migrate is
/// refused (the ledger is not empty): the next process that opens the database removes the
/// copy, whose lock nobody holds.
#[test]
fn an_abandoned_copy_of_the_embedding_cache_is_removed_by_the_next_open() {
    let db = TestDb::new();
    let dir = tempfile::tempdir().unwrap();
    let store = embedded_sample(dir.path());
    let derived = dir.path().join("derived");
    migrated(&store, &db.url, &derived, &[]);
    let abandoned = derived.join(".embeddings.sqlite-migrating.tmp");
    fs_err::copy(store.join("embeddings.sqlite"), &abandoned).unwrap();

    ok_url(&db.url, &derived, &["verify"]);
    assert!(!abandoned.exists(), "the abandoned copy of the embedding cache is still there");
}
