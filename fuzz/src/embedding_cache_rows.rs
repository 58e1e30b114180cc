//! The embedding cache's rows (`embeddings.sqlite`: identities, vectors as little-endian `f32`
//! blobs with their window and token range, refusals, metadata): a real cache file written by
//! the cache's own code (two identities, a text embedded as two windows, a refusal), whose cells
//! are overwritten with fuzzed values of any SQLite type, as someone with write access to the
//! file could; then every read a store makes: the identity, each text's embedding, the known
//! texts, a namespace's vectors, the last catch-up's overlength policy. Properties: no panic;
//! what a read returns is well formed (every vector of the identity's dimension, windows in
//! order with token ranges inside the text), else it is an error.

use std::path::Path;
use std::sync::OnceLock;

use evicortex::fuzzing::{EmbeddingCacheFile, last_overlength};
use evicortex::{EMBEDDINGS_FILE, EncoderIdentity, TextDigest, TextEmbedding, TurnId};
use evicortex_embed::EmbeddedWindow;

use crate::edits::{edits, sqlite_value};

/// The tables and columns a fuzzed edit may overwrite.
const CELLS: [(&str, &[&str]); 4] = [
    ("identities", &["digest", "canonical", "dimension"]),
    (
        "vectors",
        &[
            "identity",
            "text_digest",
            "window_index",
            "token_count",
            "token_start",
            "token_end",
            "vector",
        ],
    ),
    ("refused", &["identity", "text_digest", "token_count"]),
    ("meta", &["key", "value"]),
];

fn identity(dimension: usize, overlength: serde_json::Value) -> EncoderIdentity {
    serde_json::from_value(serde_json::json!({
        "schema": 1,
        "model": "fuzz/encoder",
        "revision": "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
        "artifacts_sha256": "00".repeat(32),
        "artifacts": { "model.safetensors": "11".repeat(32) },
        "pooling": "mean",
        "query_prefix": "",
        "document_prefix": "",
        "max_tokens": 8,
        "overlength": overlength,
        "normalization": "l2",
        "dtype": "f32",
        "dimension": dimension,
        "implementation": "evicortex-embed/bert-f32/2+fuzz",
    }))
    .expect("a well-formed identity")
}

/// The identities (windows of 4 dimensions; refusing, of 3) and the texts.
struct Fixture {
    identities: [EncoderIdentity; 2],
    texts: [TextDigest; 4],
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture {
        identities: [
            identity(4, serde_json::json!({ "window": { "overlap_tokens": 2 } })),
            identity(3, serde_json::json!("refuse")),
        ],
        texts: ["I moved to Lisbon.", "A long text in two windows.", "Nice!", "Too long."]
            .map(TextDigest::of),
    })
}

fn window(tokens: std::ops::Range<usize>, vector: &[f32]) -> EmbeddedWindow {
    EmbeddedWindow { content_tokens: tokens, vector: vector.to_vec() }
}

/// The bytes of a closed cache file, written once by the cache's own code.
fn template() -> &'static [u8] {
    static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let Fixture { identities: [windows, refusing], texts } = fixture();
        let dir = tempfile::tempdir().unwrap();
        {
            let cache = EmbeddingCacheFile::open(dir.path()).unwrap();
            let one = TextEmbedding {
                token_count: 6,
                windows: vec![window(1..5, &[0.6, 0.8, 0.0, 0.0])],
            };
            let two = TextEmbedding {
                token_count: 11,
                windows: vec![
                    window(1..7, &[0.0, 0.0, 1.0, 0.0]),
                    window(5..10, &[0.5, 0.5, 0.5, 0.5]),
                ],
            };
            let three = TextEmbedding {
                token_count: 4,
                windows: vec![window(1..3, &[0.0, 0.0, 0.0, 1.0])],
            };
            cache.put(windows, &[(texts[0], &one), (texts[1], &two), (texts[2], &three)]).unwrap();
            let small =
                TextEmbedding { token_count: 6, windows: vec![window(1..5, &[1.0, 0.0, 0.0])] };
            cache.put(refusing, &[(texts[0], &small)]).unwrap();
            cache.put_refused(&refusing.digest(), &[(texts[3], 12)]).unwrap();
            cache.set_last_identity(&windows.digest()).unwrap();
        }
        fs_err::read(dir.path().join(EMBEDDINGS_FILE)).unwrap()
    })
}

/// Applies edits read from `data`: per edit a table, a row, a column, a type and a value.
fn edit(path: &Path, data: &[u8]) {
    let conn = rusqlite::Connection::open(path).unwrap();
    for ([cell, row, kind, len], raw) in edits(data, 4, 72) {
        let value = sqlite_value(kind, raw, f64::from(len) - 100.5);
        let (table, columns) = CELLS[usize::from(cell) % CELLS.len()];
        let column = columns[usize::from(cell / 4) % columns.len()];
        // WITHOUT ROWID tables: the row by its place in key order.
        let _ = conn.execute(
            &format!(
                "UPDATE {table} SET {column} = ?1 WHERE ({key}) = (SELECT {key} FROM {table} \
                 ORDER BY 1 LIMIT 1 OFFSET ?2)",
                key = key_of(table),
            ),
            rusqlite::params![value, i64::from(row % 8)],
        );
    }
}

fn key_of(table: &str) -> &'static str {
    match table {
        "identities" => "digest",
        "vectors" => "identity, text_digest, window_index",
        "refused" => "identity, text_digest",
        _ => "key",
    }
}

/// A returned embedding is well formed for the identity it was asked under.
fn check_embedding(embedding: &TextEmbedding, dimension: usize) {
    assert!(!embedding.windows.is_empty(), "an embedding without a window");
    for window in &embedding.windows {
        assert_eq!(window.vector.len(), dimension, "a vector not of the identity's dimension");
        let tokens = &window.content_tokens;
        assert!(
            tokens.start <= tokens.end && tokens.end <= embedding.token_count,
            "window tokens {tokens:?} of a text of {} tokens",
            embedding.token_count
        );
    }
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(EMBEDDINGS_FILE);
    fs_err::write(&path, template()).unwrap();
    edit(&path, data);
    let _ = last_overlength(dir.path());
    let Ok(cache) = EmbeddingCacheFile::open(dir.path()) else { return };
    let fixture = fixture();
    let turns: Vec<(TurnId, TextDigest)> = fixture
        .texts
        .iter()
        .enumerate()
        .map(|(i, t)| (TurnId::from_raw(i as u64 + 1), *t))
        .collect();
    for identity in &fixture.identities {
        let digest = identity.digest();
        if let Ok(Some(stored)) = cache.identity(&digest) {
            assert_eq!(stored.digest(), digest, "an identity read back under another digest");
        }
        let _ = cache.known_texts(&digest);
        for text in &fixture.texts {
            let _ = cache.is_known(&digest, text);
            if let Ok(Some(embedding)) = cache.embedding(&digest, text) {
                check_embedding(&embedding, identity.dimension);
            }
        }
        if let Ok(vectors) = cache.namespace_vectors(&turns, &digest) {
            let rows = vectors.turns.len();
            assert_eq!(vectors.data.len(), rows * vectors.dimension, "a ragged matrix");
            if rows > 0 {
                assert_eq!(vectors.dimension, identity.dimension, "vectors of another dimension");
            }
            for row in 0..rows {
                assert_eq!(vectors.row(row).len(), vectors.dimension);
            }
            assert!(vectors.turns.windows(2).all(|p| p[0] <= p[1]), "rows out of turn order");
        }
    }
}
