//! Removing a record's vector (erasure): the row is gone, no path returns it, and its bytes are
//! left in no table or index file of the database.

use std::path::{Path, PathBuf};

use evicortex_core::TurnId;
use evicortex_postgres::{PgVectors, ServedBy, VectorStoreError};

use crate::{
    support::{count, ns},
    vectors_fixture::{Rng, clustered, insert, rows, space, vector_db},
};

#[test]
fn a_removed_vector_is_returned_by_no_path() {
    let (db, store) = vector_db();
    store.register(&space("enc", 24)).unwrap();
    store.register(&space("enc2", 24)).unwrap();
    let stored = rows(clustered(600, 24, 30, 5), 0);
    insert(&store, "enc", "alice", &stored);
    insert(&store, "enc2", "alice", &stored);
    insert(&store, "enc", "bob", &stored);
    let gone = TurnId::from_raw(7);
    let query = &stored[6].vector;
    let before = store.search("enc", &ns("alice"), query, 10, None).unwrap();
    assert_eq!(before.hits[0].key, gone);

    assert_eq!(store.remove(&ns("alice"), &[gone]).unwrap(), 2, "one row per encoder");

    for identity in ["enc", "enc2"] {
        assert_eq!(store.count(identity, &ns("alice")).unwrap(), 599);
        let hnsw = store.search(identity, &ns("alice"), query, 10, None).unwrap();
        assert!(matches!(hnsw.served_by, ServedBy::Hnsw { .. }));
        let exact = store.search(identity, &ns("alice"), query, 10, Some(stored[40].time)).unwrap();
        assert!(matches!(exact.served_by, ServedBy::Exact(_)));
        for found in [hnsw, exact] {
            assert_eq!(found.hits.len(), 10);
            assert!(found.hits.iter().all(|h| h.key != gone), "{identity}: {:?}", found.hits);
        }
    }
    let rows_left: i64 = db
        .raw()
        .query_one("SELECT count(*) FROM vectors_e1 WHERE namespace = 'alice' AND number = 7", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows_left, 0);
    // Another namespace's record of the same number is untouched.
    assert_eq!(store.search("enc", &ns("bob"), query, 1, None).unwrap().hits[0].key, gone);
}

#[test]
fn a_removed_vector_is_in_no_table_or_index_file() {
    let data = data_directory();
    let (db, store) = vector_db();
    store.register(&space("enc", 32)).unwrap();
    let mut stored = rows(clustered(200, 32, 20, 9), 0);
    // A vector of this run only, so no other test's bytes can match.
    let mut rng = Rng::new(std::process::id().into());
    stored[41].vector = (0..32).map(|_| rng.uniform(-1.0, 1.0)).collect();
    insert(&store, "enc", "alice", &stored);
    let text: String = db
        .raw()
        .query_one("SELECT embedding::text FROM vectors_e1 WHERE number = 42", &[])
        .unwrap()
        .get(0);
    let needle: Vec<u8> = text
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .flat_map(|x| x.parse::<f32>().unwrap().to_le_bytes())
        .collect();
    let oid: u32 = db
        .raw()
        .query_one("SELECT oid FROM pg_database WHERE datname = current_database()", &[])
        .unwrap()
        .get(0);
    let files = data.join("base").join(oid.to_string());
    // ANALYZE would keep a sample of the vectors in pg_statistic if the store let it.
    db.raw().batch_execute("ANALYZE vectors_e1_p1; CHECKPOINT").unwrap();
    let sampled = "SELECT count(*) FROM pg_stats WHERE attname = 'embedding'";
    assert_eq!(count(&db, sampled), 0, "no vector is sampled into pg_statistic");
    let holding = files_holding(&files, &needle);
    assert!(holding.len() >= 2, "the vector is in the table and the index first: {holding:?}");

    store.remove(&ns("alice"), &[TurnId::from_raw(42)]).unwrap();
    db.raw().batch_execute("CHECKPOINT").unwrap();

    let left = files_holding(&files, &needle);
    let relations: Vec<String> = left
        .iter()
        .filter_map(|path| path.file_name()?.to_str()?.split('.').next()?.parse::<u32>().ok())
        .map(|node| {
            db.raw()
                .query_opt(
                    "SELECT relname::text FROM pg_class WHERE pg_relation_filenode(oid) = $1",
                    &[&postgres::types::Oid::from(node)],
                )
                .unwrap()
                .map_or_else(|| format!("file node {node}"), |row| row.get(0))
        })
        .collect();
    assert!(left.is_empty(), "the removed vector is still in {left:?} ({relations:?})");
    assert_eq!(count(&db, "SELECT count(*) FROM vector_scrub_pending"), 0);
}

/// A removal whose rewrite did not happen (the process died after the delete committed: the
/// rows, their count and the rewrite owed in one transaction) is rewritten by the next connect.
#[test]
fn a_rewrite_still_owed_is_done_on_connect() {
    let (db, store) = vector_db();
    store.register(&space("enc", 8)).unwrap();
    insert(&store, "enc", "alice", &rows(clustered(50, 8, 5, 4), 0));
    drop(store);
    let file = "SELECT pg_relation_filenode('vectors_e1_p1')::bigint";
    let before = count(&db, file);
    db.raw()
        .batch_execute(
            "BEGIN; DELETE FROM vectors_e1_p1 WHERE number = 3; \
             UPDATE vector_partitions SET row_count = row_count - 1 WHERE id = 1; \
             INSERT INTO vector_scrub_pending VALUES ('vectors_e1_p1', pg_current_xact_id()::text); \
             COMMIT;",
        )
        .unwrap();
    let store = PgVectors::connect(&db.url).unwrap();
    assert_ne!(count(&db, file), before, "the partition was rewritten");
    assert_eq!(count(&db, "SELECT count(*) FROM vector_scrub_pending"), 0);
    assert_eq!(store.count("enc", &ns("alice")).unwrap(), 49);

    // A pending row naming something else is never made part of a statement.
    db.raw()
        .batch_execute("INSERT INTO vector_scrub_pending VALUES ('records; DROP TABLE x', '1')")
        .unwrap();
    let err = PgVectors::connect(&db.url).unwrap_err();
    assert!(matches!(err, VectorStoreError::Inconsistent { .. }), "{err}");
}

fn data_directory() -> PathBuf {
    std::env::var_os("EVICORTEX_TEST_POSTGRES_DATA").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "EVICORTEX_TEST_POSTGRES_DATA is not set: the vector read-back test scans the test \
             server's data directory. Run `scripts/postgres start` and export the data \
             directory it prints"
        )
    })
}

/// Every regular file directly in `dir` holding `needle` (a database's directory is flat).
/// Files removed while the scan runs are skipped.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut found = Vec::new();
    for entry in fs_err::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match fs_err::read(&path) {
            Ok(bytes) if finder.find(&bytes).is_some() => found.push(path),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("reading {}: {e}", path.display()),
        }
    }
    found
}
