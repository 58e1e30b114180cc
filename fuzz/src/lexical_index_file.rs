//! The lexical index file's reader (`lexical-index/*.bm25`: header, turn index, window index,
//! checksum), as a store opening it reads it. The input is the file's body; the target appends
//! its blake3 checksum, as the writer does, so that mutations reach the structure checks behind
//! it (the body alone, with no checksum, is read too). Properties: no panic; a refusal says
//! why; an accepted file gives indexes that search without panicking, whose search equals the
//! exhaustive one and the shared one, returning only their own documents by descending finite
//! score, and that write and read back to the same bytes.

use evicortex::{TurnId, fuzzing::read_lexical_file};
use evicortex_lexical::Bm25Index;

/// Queries over the seeds' words, and the input's own last bytes.
const QUERIES: [&str; 6] =
    ["Lisbon moved", "beagle Max park", "the", "sister visits June", "painting paints", "7 v2.3"];

fn bytes(index: &Bm25Index) -> Vec<u8> {
    let mut out = Vec::new();
    index.write_to(&mut out).expect("writing to memory");
    out
}

/// Searches `index` for `query` every way a compile may.
fn search(index: &Bm25Index, query: &str) {
    let terms = index.analyze(query);
    for n in [1, 3, 50] {
        let hits = index.search(&terms, n, |_| true);
        assert!(hits.len() <= n.min(index.len()), "{} hits for n = {n}", hits.len());
        // A loaded file's k1 is at most `MAX_K1`: tf and lengths are at most 2^32, so every
        // weight is finite.
        for pair in hits.windows(2) {
            assert!(pair[0].score >= pair[1].score, "hits out of order: {pair:?}");
        }
        for hit in &hits {
            assert!(hit.score.is_finite(), "a score of {}", hit.score);
        }
        for hit in &hits {
            assert!(index.row(hit.key).is_some(), "a hit on {:?}, not a document", hit.key);
        }
        let bits = |h: &[evicortex_lexical::LexicalHit<TurnId>]| -> Vec<(TurnId, u32)> {
            h.iter().map(|h| (h.key, h.score.to_bits())).collect()
        };
        let exhaustive = index.search_exhaustive(&terms, n, |_| true);
        assert_eq!(bits(&hits), bits(&exhaustive), "search and exhaustive search differ");
        let shared = index.shared_search(&terms, n);
        if shared.claim() {
            shared.run(|_| true);
        }
        assert_eq!(bits(&shared.into_hits()), bits(&hits), "shared search differs");
        // Half the documents admitted: the filter applies before the cut.
        let admitted = index.search(&terms, n, |k| k.raw() % 2 == 0);
        assert!(admitted.iter().all(|h| h.key.raw() % 2 == 0), "a refused document returned");
    }
    if let Some(covers) = index.covers() {
        let _ = index.rows_up_to(covers);
    }
}

/// An accepted index searches, and writes and reads back unchanged.
fn check(index: &Bm25Index, extra: &str) {
    for query in QUERIES.iter().copied().chain([extra]) {
        search(index, query);
    }
    let written = bytes(index);
    let again = Bm25Index::read_from(&mut written.as_slice())
        .unwrap_or_else(|e| panic!("an accepted index, written again, is refused: {e}"));
    assert_eq!(bytes(&again), written, "an accepted index changed through its bytes");
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let _ = read_lexical_file(data);
    let mut file = data.to_vec();
    file.extend_from_slice(blake3::hash(data).as_bytes());
    let extra = String::from_utf8_lossy(&data[data.len().saturating_sub(12)..]).into_owned();
    match read_lexical_file(&file) {
        Err(reason) => assert!(!reason.is_empty(), "a refusal that says nothing"),
        Ok(saved) => {
            check(&saved.lexical, &extra);
            if let Some(window) = &saved.window {
                assert!(window.radius() > 0 && window.index().len() <= window.built_for());
                check(window.index(), &extra);
            }
        }
    }
}
