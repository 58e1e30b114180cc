//! Shared pieces of the vector store tests: a database with pgvector, seeded clustered vectors
//! and the brute-force cosine top-n they are checked against.

use evicortex_core::TurnId;
use evicortex_postgres::{EncoderSpace, HnswBuild, PgVectors, StoredVector};
use evicortex_vector::VectorHit;

use crate::support::{TestDb, ns};

/// A fresh database with the `vector` extension and a store over it.
pub fn vector_db() -> (TestDb, PgVectors) {
    let db = TestDb::new();
    db.raw().batch_execute("CREATE EXTENSION vector").expect("CREATE EXTENSION vector");
    let store = PgVectors::connect(&db.url).unwrap_or_else(|e| panic!("connecting the store: {e}"));
    (db, store)
}

/// An encoder space for the tests, with a smaller build beam than the default so that the
/// few thousand inserts stay quick.
pub fn space(identity: &str, dim: usize) -> EncoderSpace {
    EncoderSpace {
        identity: identity.to_owned(),
        dim,
        hnsw: HnswBuild { m: 16, ef_construction: 64 },
    }
}

/// A deterministic generator (SplitMix64): the tests need seeded data, not a quality RNG.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `count` vectors like sentence embeddings: each a random mixture of two of `centroids` random
/// centres plus small noise, so neighbourhoods are dense and near-ties common.
pub fn clustered(count: usize, dim: usize, centroids: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    let centres: Vec<Vec<f32>> =
        (0..centroids).map(|_| (0..dim).map(|_| rng.uniform(-1.0, 1.0)).collect()).collect();
    (0..count)
        .map(|_| {
            let (a, b) = (&centres[rng.below(centroids)], &centres[rng.below(centroids)]);
            let w = rng.uniform(0.0, 1.0);
            a.iter().zip(b).map(|(x, y)| w * x + (1.0 - w) * y + rng.uniform(-0.05, 0.05)).collect()
        })
        .collect()
}

/// A stored row as the tests keep it.
#[derive(Clone, Debug)]
pub struct Row {
    pub record: TurnId,
    pub time: i64,
    pub vector: Vec<f32>,
}

/// Rows numbered from 1, one second apart from `start`.
pub fn rows(vectors: Vec<Vec<f32>>, start: i64) -> Vec<Row> {
    vectors
        .into_iter()
        .enumerate()
        .map(|(i, vector)| Row {
            record: TurnId::from_raw(i as u64 + 1),
            time: start + i as i64 * 1_000_000,
            vector,
        })
        .collect()
}

/// Stores `rows` in `namespace`, in batches.
pub fn insert(store: &PgVectors, identity: &str, namespace: &str, rows: &[Row]) {
    for batch in rows.chunks(500) {
        let batch: Vec<StoredVector<'_>> = batch
            .iter()
            .map(|r| StoredVector {
                segment: 0,
                record: r.record,
                event_utc_micros: r.time,
                vector: &r.vector,
            })
            .collect();
        store.insert(identity, &ns(namespace), &batch).unwrap();
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// The true top `n` of the rows at or before `as_of`: cosine in `f64`, ties by record.
pub fn brute_force(
    rows: &[Row],
    query: &[f32],
    n: usize,
    as_of: Option<i64>,
) -> Vec<(TurnId, f64)> {
    let mut scored: Vec<(TurnId, f64)> = rows
        .iter()
        .filter(|r| as_of.is_none_or(|t| r.time <= t))
        .map(|r| (r.record, cosine(&r.vector, query)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(n);
    scored
}

/// The share of `truth`'s records found in `hits`.
pub fn recall(hits: &[VectorHit<TurnId>], truth: &[(TurnId, f64)]) -> f64 {
    let found = truth.iter().filter(|(record, _)| hits.iter().any(|h| h.key == *record)).count();
    found as f64 / truth.len() as f64
}

/// Asserts `hits` are `truth`: same records in the same order, scores within `f32` rounding.
pub fn assert_exact(hits: &[VectorHit<TurnId>], truth: &[(TurnId, f64)], what: &str) {
    let keys: Vec<TurnId> = hits.iter().map(|h| h.key).collect();
    let expected: Vec<TurnId> = truth.iter().map(|t| t.0).collect();
    assert_eq!(keys, expected, "{what}: records");
    for (hit, (_, score)) in hits.iter().zip(truth) {
        assert!(
            (f64::from(hit.score) - score).abs() < 1e-5,
            "{what}: score {} vs {score}",
            hit.score
        );
    }
}
