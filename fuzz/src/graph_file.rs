//! The HNSW graph file's reader (`vector-index/*.hnsw`: header, keys, unit vectors, levels,
//! links, checksum), as a store opening it reads it (`WindowedIndex::load_hnsw`, keys
//! `(turn, window)`), and with turn keys, which the file's key tag must refuse or accept. The
//! input is the file's body; the target appends its blake3 checksum, as the writer does, so that
//! mutations reach the structure checks before it (the body alone is read too). Properties: no
//! panic; a refusal is `Corrupted` (the file is readable); an accepted graph has the header's
//! rows and dimension, searches without panicking, returning only its own keys by descending
//! finite score, and takes further vectors, as a store extends a loaded graph.

use std::path::Path;

use evicortex::TurnId;
use evicortex_vector::{
    HnswIndex, IndexFileError, VectorIndexRead, WindowKey, WindowedIndex, read_index_header,
};

/// A unit vector of `dim` dimensions drawn from `seed`.
fn unit(dim: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        v[0] = 1.0;
    } else {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn refused(err: &IndexFileError) {
    assert!(
        matches!(err, IndexFileError::Corrupted { .. }),
        "a readable file refused as unreadable: {err}"
    );
}

fn check_hits<K: Copy + std::fmt::Debug>(
    hits: &[evicortex_vector::VectorHit<K>],
    n: usize,
    len: usize,
    own: impl Fn(K) -> bool,
) {
    assert!(hits.len() <= n.min(len), "{} hits for n = {n} over {len} rows", hits.len());
    for hit in hits {
        assert!(hit.score.is_finite(), "a score of {}", hit.score);
        assert!(own(hit.key), "a hit on {:?}, not a row of the graph", hit.key);
    }
    for pair in hits.windows(2) {
        assert!(pair[0].score >= pair[1].score, "hits out of order");
    }
}

/// Whether `index` holds a window of `turn` (a damaged file's turn may lack window 0).
fn holds(index: &WindowedIndex, turn: TurnId) -> bool {
    let exact = index.hnsw().expect("a loaded graph").exact();
    exact.row_map().keys().iter().any(|&(t, _)| t == turn)
}

/// The store's own reading: windows of turns.
fn windowed(path: &Path) {
    let header = read_index_header(path);
    let (header_again, mut index) = match WindowedIndex::load_hnsw(path) {
        Ok(loaded) => loaded,
        Err(err) => return refused(&err),
    };
    assert_eq!(header.ok().as_ref(), Some(&header_again), "the header read alone differs");
    let (dim, rows) = (header_again.dim, header_again.rows);
    assert_eq!((index.dim(), index.len()), (dim, rows));
    let hnsw = index.hnsw().expect("a loaded graph");
    let mut keys = Vec::new();
    for seed in 0..3u64 {
        let query = unit(dim, seed);
        for n in [1, 10] {
            let hits = hnsw.search(&query, n, &mut |_| true).expect("a query of its dimension");
            check_hits(&hits, n, rows, |k: WindowKey| hnsw.exact().get(k).is_some());
            keys.extend(hits.iter().map(|h| h.key));
            let turns = index.search(&query, n, &mut |_| true).expect("a query of its dimension");
            check_hits(&turns, n, rows, |t: TurnId| holds(&index, t));
        }
    }
    // Stored vectors as queries.
    for key in keys.iter().take(2) {
        let query = hnsw.exact().get(*key).expect("a hit's vector").to_vec();
        let hits = hnsw.search(&query, 5, &mut |_| true).expect("a query of its dimension");
        check_hits(&hits, 5, rows, |k: WindowKey| hnsw.exact().get(k).is_some());
    }
    // The turns after the covered record, added as a store adds them on load.
    let next = header_again.covers.map_or(1, |c| c.raw().saturating_add(1));
    let new: Vec<(WindowKey, Vec<f32>)> = (0..3u64)
        .map(|i| ((TurnId::from_raw(next.saturating_add(i)), 0), unit(dim, 7 + i)))
        .collect();
    if index.extend_windows(new.iter().map(|(k, v)| (*k, v.as_slice()))).is_ok() {
        let query = unit(dim, 9);
        let hits = index.search(&query, 4, &mut |_| true).expect("a query of its dimension");
        check_hits(&hits, 4, rows + 3, |t: TurnId| holds(&index, t));
    }
}

/// The same file read with turn keys: the key tag decides.
fn turns(path: &Path) {
    match HnswIndex::<TurnId>::load(path) {
        Ok((header, index)) => {
            let query = unit(header.dim, 3);
            let hits = index.search(&query, 5, &mut |_| true).expect("a query of its dimension");
            check_hits(&hits, 5, header.rows, |k| index.exact().get(k).is_some());
        }
        Err(err) => refused(&err),
    }
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.hnsw");
    fs_err::write(&path, data).unwrap();
    if let Err(err) = WindowedIndex::load_hnsw(&path) {
        refused(&err);
    }
    let mut file = data.to_vec();
    file.extend_from_slice(blake3::hash(data).as_bytes());
    fs_err::write(&path, &file).unwrap();
    windowed(&path);
    turns(&path);
}
