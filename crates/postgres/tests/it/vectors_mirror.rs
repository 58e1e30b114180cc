//! Mirroring a ledger's vectors into pgvector: the rows of many statements are all stored or,
//! when one is refused, none; the partition's HNSW index is built once, over them all.

use evicortex_core::TurnId;
use evicortex_ledger::EvidenceLedger;
use evicortex_postgres::{StoredVector, VectorStoreError};

use crate::{
    support::{count, ns, turn},
    vectors_fixture::{clustered, space, vector_db},
};

#[test]
fn a_refused_vector_in_the_last_statement_stores_none_of_the_mirror() {
    let (db, store) = vector_db();
    let turns: Vec<_> = (0..1_200).map(|i| turn("alice", "s1", i, &format!("turn {i}"))).collect();
    let ids: Vec<TurnId> =
        db.ledger().append(&turns).unwrap().outcomes.iter().map(|o| o.id).collect();
    store.register(&space("enc", 8)).unwrap();
    let vectors = clustered(1_200, 8, 10, 3);
    let zero = [0.0f32; 8];
    let mut rows: Vec<StoredVector<'_>> = ids
        .iter()
        .zip(&vectors)
        .map(|(&record, vector)| StoredVector { record, segment: 0, event_utc_micros: 0, vector })
        .collect();
    // Past the first statements' rows, which the server has by then.
    rows[1_150].vector = &zero;
    let refused = store.mirror("enc", &ns("alice"), &rows).unwrap_err();
    assert!(
        matches!(refused, VectorStoreError::InvalidVector { record: Some(r), .. } if r == ids[1_150]),
        "{refused}"
    );
    assert_eq!(store.count("enc", &ns("alice")).unwrap(), 0, "none of the mirror is kept");

    rows[1_150].vector = &vectors[1_150];
    assert_eq!(store.mirror("enc", &ns("alice"), &rows).unwrap(), 1_200);
    assert_eq!(store.count("enc", &ns("alice")).unwrap(), 1_200);
    let indexes = "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'vectors_e%_hnsw'";
    assert_eq!(count(&db, indexes), 1);
}
