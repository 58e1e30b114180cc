//! The HNSW graph of `evicortex-vector` against usearch and hnsw_rs, on the real MiniLM vectors of an audit
//! store (`evicortex bench ann prepare` then `embed`): build time on two threads, recall@50
//! against the exact cosine scan, and search p50/p99, without a filter and with a filter that
//! admits the first 10% of the keys (an as-of filter's shape), applied inside each search.
//!
//!   cargo run --release --manifest-path bench/hnsw-crates/Cargo.toml -- A100K/embeddings.sqlite [N]
//!
//! The last 200 vectors of the cache (in key order) are the queries and are not indexed: held
//! out, like a question that is not in the store. Both graphs use m 16, ef_construction 200 and
//! ef_search 256, the product's parameters.

use std::time::{Duration, Instant};

use evicortex_vector::{ExactIndex, HnswIndex, HnswParams, VectorIndex, VectorIndexRead};

const QUERIES: usize = 200;
const K: usize = 50;
const THREADS: usize = 2;

fn main() {
    let mut args = std::env::args().skip(1);
    let cache = args.next().expect("usage: hnsw-crates EMBEDDINGS.sqlite [VECTORS]");
    let limit: Option<usize> = args.next().map(|n| n.parse().expect("VECTORS is a number"));
    let mut vectors = read_vectors(&cache);
    let queries = vectors.split_off(vectors.len() - QUERIES);
    if let Some(n) = limit {
        vectors.truncate(n);
    }
    let n = vectors.len();
    let dim = vectors[0].len();
    println!("{n} vectors of {dim} dimensions from {cache}; {QUERIES} held-out queries");
    let tenth = (n / 10) as u32;

    let mut exact = ExactIndex::<u32>::new(dim);
    for (key, v) in vectors.iter().enumerate() {
        exact.insert(key as u32, v).expect("insert");
    }
    let truth = |admit: &dyn Fn(u32) -> bool| -> Vec<Vec<u32>> {
        queries
            .iter()
            .map(|q| {
                let hits = exact.search(q, K, &mut |k| admit(k)).expect("exact search");
                hits.iter().map(|h| h.key).collect()
            })
            .collect()
    };
    let all: &dyn Fn(u32) -> bool = &|_| true;
    let first_tenth: &dyn Fn(u32) -> bool = &|k| k < tenth;
    let truths = [truth(all), truth(first_tenth)];

    let params = HnswParams::default();
    let pool = rayon_threads();
    let started = Instant::now();
    let ours = pool
        .install(|| HnswIndex::build(exact.clone(), params, &mut |_, _| {}))
        .expect("graph build");
    let ours_build = started.elapsed();

    let options = usearch::IndexOptions {
        dimensions: dim,
        metric: usearch::MetricKind::Cos,
        quantization: usearch::ScalarKind::F32,
        connectivity: params.m,
        expansion_add: params.ef_construction,
        expansion_search: params.ef_search,
        multi: false,
    };
    let theirs = usearch::Index::new(&options).expect("usearch index");
    theirs.reserve_capacity_and_threads(n, THREADS).expect("usearch reserve");
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (theirs, vectors) = (&theirs, &vectors);
            s.spawn(move || {
                for key in (t..n).step_by(THREADS) {
                    theirs.add(key as u64, &vectors[key]).expect("usearch add");
                }
            });
        }
    });
    let theirs_build = started.elapsed();

    let started = Instant::now();
    let hnsw_rs_index = hnsw_rs::hnsw::Hnsw::<f32, hnsw_rs::prelude::DistCosine>::new(
        params.m,
        n,
        16,
        params.ef_construction,
        hnsw_rs::prelude::DistCosine {},
    );
    let items: Vec<(&[f32], usize)> =
        vectors.iter().enumerate().map(|(k, v)| (&v[..], k)).collect();
    pool.install(|| hnsw_rs_index.parallel_insert_slice(&items));
    let hnsw_rs_build = started.elapsed();

    println!(
        "| index | build ({THREADS} threads) | memory | filter | recall@{K} | search p50 / p99 |"
    );
    println!("|---|--:|--:|---|--:|--:|");
    for (name, filter, truth) in
        [("none", all, &truths[0]), ("first 10% of keys", first_tenth, &truths[1])]
    {
        let (recall, times) = measure(truth, |i| {
            let hits = ours.search(&queries[i], K, &mut |k| filter(k)).expect("graph search");
            hits.iter().map(|h| h.key).collect()
        });
        row(
            "evicortex-vector HnswIndex",
            ours_build,
            Some(ours.heap_bytes()),
            name,
            recall,
            &times,
        );
        let (recall, times) = measure(truth, |i| {
            let found = theirs
                .filtered_search(&queries[i], K, |key: u64| filter(key as u32))
                .expect("usearch search");
            found.keys.iter().map(|&k| k as u32).collect()
        });
        row("usearch 2 (f32)", theirs_build, Some(theirs.memory_usage()), name, recall, &times);
        let (recall, times) = measure(truth, |i| {
            let keep = |id: &usize| filter(*id as u32);
            let found = hnsw_rs_index.search_filter(&queries[i], K, params.ef_search, Some(&keep));
            found.iter().map(|nb| nb.d_id as u32).collect()
        });
        row("hnsw_rs 0.3 (f32)", hnsw_rs_build, None, name, recall, &times);
    }
}

fn rayon_threads() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(THREADS).build().expect("pool")
}

/// Recall against `truth` and the time of each of the queries' searches.
fn measure(truth: &[Vec<u32>], mut search: impl FnMut(usize) -> Vec<u32>) -> (f64, Vec<Duration>) {
    let (mut found, mut wanted, mut times) = (0usize, 0usize, Vec::new());
    for _pass in 0..3 {
        times.clear();
        found = 0;
        wanted = 0;
        for (i, expected) in truth.iter().enumerate() {
            let started = Instant::now();
            let got = search(i);
            times.push(started.elapsed());
            found += got.iter().filter(|k| expected.contains(k)).count();
            wanted += expected.len();
        }
    }
    times.sort();
    (found as f64 / wanted as f64, times)
}

/// `bytes`: what the index reports holding (hnsw_rs reports nothing).
fn row(
    index: &str,
    build: Duration,
    bytes: Option<usize>,
    filter: &str,
    recall: f64,
    times: &[Duration],
) {
    let memory =
        bytes.map_or("-".to_owned(), |b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64));
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "| {index} | {:.2} s | {memory} | {filter} | {recall:.4} | {:.3} / {:.3} ms |",
        build.as_secs_f64(),
        at(0.5),
        at(0.99)
    );
}

/// Every vector of the cache, in its key order (text digest, window).
fn read_vectors(path: &str) -> Vec<Vec<f32>> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the embedding cache");
    let mut stmt = conn
        .prepare("SELECT vector FROM vectors ORDER BY identity, text_digest, window_index")
        .expect("prepare");
    stmt.query_map([], |row| row.get::<_, Vec<u8>>(0))
        .expect("query")
        .map(|blob| {
            let blob = blob.expect("row");
            blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        })
        .collect()
}
