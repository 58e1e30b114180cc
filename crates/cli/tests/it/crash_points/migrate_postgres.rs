//! `evicortex migrate --from DIR --to postgres://...` killed at random moments: while it
//! verifies the source, copies the ledger in its one transaction, verifies both sides, or
//! carries the embedding cache into the database. Each run migrates into a
//! new database. After the kill the source store's files are byte for byte what they were and
//! it verifies; `migrate` is run again: it completes (the killed one committed nothing), or it
//! is refused because the ledger is not empty, and then the database holds the whole ledger:
//! it verifies with the source's records and chain head. Needs the test PostgreSQL server
//! (`scripts/postgres start`, EVICORTEX_TEST_POSTGRES_URL), as `migrate_postgres` does.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use evicortex::{CatchUpLimits, Memory, Overlength};
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::{Row, Window, erase::turns, kill_after};
use crate::{
    cli::{command, ok},
    migrate_postgres::{migrate, ok_url},
    store_bytes::all_bytes,
    test_db::TestDb,
};

const NAMESPACE: &str = "moved";
const TURNS: usize = 3_000;
/// Turns embedded, so that there is an embedding cache to carry.
const EMBEDDED: usize = 200;

pub fn to_postgres(mut rng: StdRng, wanted: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let lines: Vec<_> = (0..TURNS)
        .map(|t| {
            json!({"namespace": NAMESPACE, "session": format!("s{}", t / 20), "turn": t % 20,
                "role": "user", "time": "2024-06-01T00:00:00Z",
                "text": format!("moved turn {t}: {}", "dolor sit amet ".repeat(20))})
        })
        .collect();
    {
        let encoder = evicortex::load_pinned_encoder(Overlength::Refuse)
            .expect("the pinned encoder (run `evicortex model fetch`)");
        let memory = Memory::builder(&store).encoder(encoder).open().unwrap();
        memory.append(&turns(&lines[..EMBEDDED])).unwrap();
        memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
        memory.append(&turns(&lines[EMBEDDED..])).unwrap();
    }
    let verified = verify_json(&ok(&store, &["verify", "--json"]));
    let source = all_bytes(&store);

    let mut row = Row::new();
    let mut window = Window::new(2_000.0, 20.0, 60_000.0);
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let db = TestDb::new();
        let derived = dir.path().join(format!("derived{run}"));
        let mut child = migrate_command(&store, &db.url, &derived);
        let (running, status) = kill_after(&mut child, window.sample(&mut rng));
        assert!(running || status.success(), "run {run}: migrate failed: {status}");

        let changed: Vec<_> = changed_files(&source, &all_bytes(&store));
        assert!(changed.is_empty(), "run {run}: the source store's files changed: {changed:?}");
        ok(&store, &["verify"]);
        let again = migrate(&store, &db.url, &derived, &[]);
        let place = match again.code {
            0 => {
                assert!(running, "run {run}: a second migrate into a migrated database worked");
                "before the ledger's commit"
            }
            2 if again.stderr.contains("is not empty") => {
                if crate::postgres_shared::cached_vectors(&db.url) > 0 {
                    "after the embedding cache was carried"
                } else {
                    "after the ledger's commit, before the cache was carried"
                }
            }
            code => panic!("run {run}: migrate again: exit {code}\n{}", again.stderr),
        };
        let target = verify_json(&ok_url(&db.url, &derived, &["verify", "--json"]));
        let left = temporaries(&derived);
        assert!(left.is_empty(), "run {run} ({place}): temporary files left: {left:?}");
        assert_eq!(target, verified, "run {run}: the database's ledger differs from the source's");
        if running {
            row.kill(place);
            window.scale(if place == "before the ledger's commit" { 1.1 } else { 0.9 });
        } else {
            row.completed += 1;
            window.scale(0.8);
        }
        run += 1;
    }
    row
}

fn migrate_command(store: &Path, url: &str, derived: &Path) -> std::process::Child {
    command(store.parent().unwrap(), &["migrate", "--from", store.to_str().unwrap(), "--to", url])
        .env("EVICORTEX_DERIVED_DIR", derived)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The parts of `verify --json` both kinds of ledger report alike.
fn verify_json(text: &str) -> Value {
    let full: Value = serde_json::from_str(text).unwrap();
    json!({"records": full["records"], "turns": full["turns"],
        "erased_turns": full["erased_turns"], "chain_head": full["chain_head"]})
}

/// The files that differ between two listings of a folder (added, removed or changed). SQLite's
/// shared-memory index (`-shm`) and an empty write-ahead log, which a read-only connection to
/// the embedding cache leaves behind (a completed migrate too), hold no data and are left out.
fn changed_files(before: &[(PathBuf, Vec<u8>)], after: &[(PathBuf, Vec<u8>)]) -> Vec<PathBuf> {
    let no_data = |(path, bytes): &&(PathBuf, Vec<u8>)| {
        let name = path.to_string_lossy();
        name.ends_with("-shm") || (name.ends_with("-wal") && bytes.is_empty())
    };
    let after: Vec<_> = after.iter().filter(|f| !no_data(f)).cloned().collect();
    let mut changed: Vec<PathBuf> = before
        .iter()
        .filter(|(path, bytes)| !after.iter().any(|(p, b)| p == path && b == bytes))
        .map(|(path, _)| path.clone())
        .collect();
    changed.extend(
        after.iter().filter(|(p, _)| !before.iter().any(|(q, _)| p == q)).map(|(p, _)| p.clone()),
    );
    changed
}

/// The temporary files in `derived` (a missing folder holds none).
fn temporaries(derived: &Path) -> Vec<PathBuf> {
    let entries = fs_err::read_dir(derived).into_iter().flatten().flatten();
    entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "tmp")).collect()
}
