//! The HNSW path against the exact answer on clustered vectors, unfiltered and with as-of
//! filters admitting about 10% (which must take the exact path) and 50% of the rows.

use evicortex_postgres::{ExactReason, ServedBy};

use crate::{
    support::ns,
    vectors_fixture::{
        assert_exact, brute_force, clustered, insert, recall, rows, space, vector_db,
    },
};

const ROWS: usize = 3000;
const DIM: usize = 64;
const QUERIES: usize = 100;

#[test]
fn hnsw_recall_at_10_against_exact_is_at_least_0_95() {
    let (_db, store) = vector_db();
    store.register(&space("enc", DIM)).unwrap();
    let stored = rows(clustered(ROWS, DIM, 300, 11), 1_700_000_000_000_000);
    insert(&store, "enc", "alice", &stored);
    let queries = clustered(QUERIES, DIM, 300, 12);

    let unfiltered = mean_recall(&store, &stored, &queries, None);
    println!("pgvector HNSW recall@10 against exact, unfiltered: {unfiltered:.4}");
    assert!(unfiltered >= 0.95, "unfiltered recall@10 {unfiltered}");

    let half = stored[ROWS / 2 - 1].time;
    let at_half = mean_recall(&store, &stored, &queries, Some(half));
    println!("pgvector HNSW recall@10 against exact, as-of admitting 50%: {at_half:.4}");
    assert!(at_half >= 0.95, "recall@10 at 50% {at_half}");

    let tenth = stored[ROWS / 10 - 1].time;
    for (q, query) in queries.iter().enumerate() {
        let found = store.search("enc", &ns("alice"), query, 10, Some(tenth)).unwrap();
        let admitted = (ROWS / 10) as u64;
        assert_eq!(
            found.served_by,
            ServedBy::Exact(ExactReason::SelectiveFilter { admitted, rows: ROWS as u64 }),
            "a filter admitting 10% takes the exact path"
        );
        assert_exact(
            &found.hits,
            &brute_force(&stored, query, 10, Some(tenth)),
            &format!("query {q}"),
        );
    }
    println!("as-of admitting 10%: exact path, equal to brute force on {QUERIES} queries");
}

/// Mean recall@10 of the HNSW path; every search must be served by the index.
fn mean_recall(
    store: &evicortex_postgres::PgVectors,
    stored: &[crate::vectors_fixture::Row],
    queries: &[Vec<f32>],
    as_of: Option<i64>,
) -> f64 {
    let mut sum = 0.0;
    for query in queries {
        let found = store.search("enc", &ns("alice"), query, 10, as_of).unwrap();
        assert!(
            matches!(found.served_by, ServedBy::Hnsw { m: 16, ef_construction: 64, .. }),
            "{:?}",
            found.served_by
        );
        assert_eq!(found.hits.len(), 10);
        assert!(
            found
                .hits
                .iter()
                .all(|h| as_of.is_none_or(|t| stored[h.key.raw() as usize - 1].time <= t))
        );
        sum += recall(&found.hits, &brute_force(stored, query, 10, as_of));
    }
    sum / queries.len() as f64
}
