//! Namespaces and encoders never mix: a namespace's search never returns another's vector, and
//! an encoder's vectors are refused in another dimension.

use evicortex_core::TurnId;
use evicortex_postgres::{ExactReason, PgVectors, ServedBy, StoredVector, VectorStoreError};

use crate::{
    support::{TestDb, ns},
    vectors_fixture::{clustered, insert, rows, space, vector_db},
};

#[test]
fn a_namespace_never_sees_another_namespaces_vectors() {
    let (_db, store) = vector_db();
    store.register(&space("enc", 16)).unwrap();
    let a = rows(clustered(300, 16, 20, 1), 1_000_000);
    let mut b = rows(clustered(300, 16, 20, 2), 1_000_000);
    for row in &mut b {
        row.record = TurnId::from_raw(row.record.raw() + 10_000);
    }
    insert(&store, "enc", "a", &a);
    insert(&store, "enc", "b", &b);
    for query in b.iter().take(20).map(|r| &r.vector) {
        for as_of in [None, Some(a[20].time), Some(a[200].time)] {
            let found = store.search("enc", &ns("a"), query, 10, as_of).unwrap();
            assert_eq!(found.hits.len(), 10);
            assert!(
                found.hits.iter().all(|h| h.key.raw() <= 300),
                "namespace a returned b's vector ({:?})",
                found.served_by
            );
        }
    }
    let none = store.search("enc", &ns("c"), &b[0].vector, 10, None).unwrap();
    assert!(none.hits.is_empty());
    assert_eq!(none.served_by, ServedBy::Exact(ExactReason::NoVectors));
    assert_eq!(store.count("enc", &ns("a")).unwrap(), 300);
}

#[test]
fn an_encoder_of_another_dimension_is_refused() {
    let (_db, store) = vector_db();
    store.register(&space("minilm", 8)).unwrap();
    let refused = store.register(&space("minilm", 16)).unwrap_err();
    assert!(
        matches!(refused, VectorStoreError::EncoderMismatch { stored: 8, requested: 16, .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("minilm"), "{refused}");

    let wide = [1.0; 16];
    let err = store
        .insert(
            "minilm",
            &ns("alice"),
            &[StoredVector {
                segment: 0,
                record: TurnId::from_raw(7),
                event_utc_micros: 0,
                vector: &wide,
            }],
        )
        .unwrap_err();
    assert!(
        matches!(err, VectorStoreError::Dimension { got: 16, expected: 8, record: Some(r), .. } if r.raw() == 7),
        "{err}"
    );
    assert!(err.to_string().contains("record #7") && err.to_string().contains("alice"), "{err}");
    let err = store.search("minilm", &ns("alice"), &wide, 5, None).unwrap_err();
    assert!(matches!(err, VectorStoreError::Dimension { record: None, .. }), "{err}");
    let err = store.search("mpnet", &ns("alice"), &[1.0; 8], 5, None).unwrap_err();
    assert!(matches!(err, VectorStoreError::UnknownEncoder { .. }), "{err}");

    // A second encoder of the same dimension is a space of its own: nothing crosses.
    store.register(&space("other", 8)).unwrap();
    insert(&store, "minilm", "alice", &rows(clustered(50, 8, 5, 3), 0));
    assert!(store.search("other", &ns("alice"), &[1.0; 8], 5, None).unwrap().hits.is_empty());
    // A second handle sees the registration and refuses the same way.
    let again = PgVectors::connect(store.url()).unwrap();
    assert!(matches!(
        again.register(&space("minilm", 4)),
        Err(VectorStoreError::EncoderMismatch { stored: 8, requested: 4, .. })
    ));
}

#[test]
fn unusable_and_duplicate_vectors_are_refused_and_nothing_is_stored() {
    let (_db, store) = vector_db();
    store.register(&space("enc", 2)).unwrap();
    let store_one = |record: u64, vector: &[f32]| {
        store.insert(
            "enc",
            &ns("alice"),
            &[StoredVector {
                segment: 0,
                record: TurnId::from_raw(record),
                event_utc_micros: 0,
                vector,
            }],
        )
    };
    assert!(matches!(store_one(1, &[0.0, 0.0]), Err(VectorStoreError::InvalidVector { .. })));
    assert!(matches!(store_one(1, &[f32::NAN, 1.0]), Err(VectorStoreError::InvalidVector { .. })));
    assert!(matches!(store_one(0, &[1.0, 1.0]), Err(VectorStoreError::InvalidParameter { .. })));
    store_one(1, &[1.0, 0.0]).unwrap();
    let err = store
        .insert(
            "enc",
            &ns("alice"),
            &[
                StoredVector {
                    segment: 0,
                    record: TurnId::from_raw(2),
                    event_utc_micros: 0,
                    vector: &[0.0, 1.0],
                },
                StoredVector {
                    segment: 0,
                    record: TurnId::from_raw(1),
                    event_utc_micros: 0,
                    vector: &[1.0, 1.0],
                },
            ],
        )
        .unwrap_err();
    assert!(
        matches!(err, VectorStoreError::DuplicateRecord { record, .. } if record.raw() == 1),
        "{err}"
    );
    assert_eq!(store.count("enc", &ns("alice")).unwrap(), 1, "the refused batch left nothing");
}

#[test]
fn a_database_without_pgvector_is_refused() {
    let db = TestDb::new();
    let err = PgVectors::connect(&db.url).unwrap_err();
    assert!(matches!(err, VectorStoreError::Extension { .. }), "{err}");
    assert!(err.to_string().contains("CREATE EXTENSION vector"), "{err}");
}
