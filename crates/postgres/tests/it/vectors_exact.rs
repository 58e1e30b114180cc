//! The exact path: equal to a brute-force cosine top-n, with an inclusive as-of boundary.

use evicortex_core::TurnId;
use evicortex_postgres::{ExactReason, ServedBy, StoredVector};

use crate::{
    support::ns,
    vectors_fixture::{assert_exact, brute_force, clustered, insert, rows, space, vector_db},
};

#[test]
fn the_exact_path_equals_a_brute_force_top_n() {
    let (_db, store) = vector_db();
    store.register(&space("enc", 32)).unwrap();
    let stored = rows(clustered(400, 32, 40, 7), 1_700_000_000_000_000);
    insert(&store, "enc", "alice", &stored);
    // Admits 30 of 400 rows: under an eighth, so the exact scan answers.
    let as_of = stored[29].time;
    for (q, query) in clustered(20, 32, 40, 8).iter().enumerate() {
        let found = store.search("enc", &ns("alice"), query, 10, Some(as_of)).unwrap();
        assert_eq!(
            found.served_by,
            ServedBy::Exact(ExactReason::SelectiveFilter { admitted: 30, rows: 400 })
        );
        assert_exact(
            &found.hits,
            &brute_force(&stored, query, 10, Some(as_of)),
            &format!("query {q}"),
        );
    }
    // More candidates than hnsw.ef_search allows: every row, in exact order.
    let query = &stored[3].vector;
    let all = store.search("enc", &ns("alice"), query, 1001, None).unwrap();
    assert_eq!(all.served_by, ServedBy::Exact(ExactReason::BeyondEfSearch));
    assert_exact(&all.hits, &brute_force(&stored, query, 1001, None), "all rows");
}

/// The compiler admits a turn whose event time is at or before the as-of time (`time <= as_of`
/// in UTC microseconds); the store compares the same way.
#[test]
fn the_as_of_boundary_is_inclusive() {
    let (_db, store) = vector_db();
    store.register(&space("enc", 4)).unwrap();
    let t = 1_714_640_400_250_000;
    let vectors = [[1.0, 0.0, 0.0, 0.0], [0.9, 0.1, 0.0, 0.0], [0.8, 0.2, 0.0, 0.0]];
    let times = [t - 1, t, t + 1];
    let batch: Vec<StoredVector<'_>> = (0..3)
        .map(|i| StoredVector {
            segment: 0,
            record: TurnId::from_raw(i as u64 + 1),
            event_utc_micros: times[i],
            vector: &vectors[i],
        })
        .collect();
    store.insert("enc", &ns("bob"), &batch).unwrap();
    let found = store.search("enc", &ns("bob"), &[1.0, 0.0, 0.0, 0.0], 10, Some(t)).unwrap();
    let records: Vec<u64> = found.hits.iter().map(|h| h.key.raw()).collect();
    assert_eq!(records, [1, 2], "the turn at exactly the as-of time is admitted, the next not");
    assert!(matches!(found.served_by, ServedBy::Exact(_)));
    let before = store.search("enc", &ns("bob"), &[1.0, 0.0, 0.0, 0.0], 10, Some(t - 2)).unwrap();
    assert!(before.hits.is_empty());
}
