//! `evicortex embed` (the catch-up of the embedding cache) killed at random moments. Each run
//! appends `RUN_TURNS` turns with new texts, runs `embed` in small chunks and SIGKILLs it. Then
//! `verify` passes and every cached text has exactly one vector, equal to what the encoder
//! computes for it in this process (texts the kill left unembedded wait for the next run). Every
//! few runs and at the end, `embed` runs to completion: it embeds exactly the texts not yet
//! cached, and `compile` works with dense retrieval on.

use std::{collections::BTreeMap, path::Path, process::Stdio};

use evicortex::{EmbeddingRole, Memory, Overlength, TextDigest};
use rand::{Rng, rngs::StdRng};
use serde_json::json;

use super::{Row, Window, erase::turns, kill_after};
use crate::cli::{command, ok};

const NAMESPACE: &str = "embed";
const RUN_TURNS: usize = 32;
/// Texts per committed chunk: small, so a kill can land between commits.
const CHUNK: &str = "4";
/// Every this many runs, `embed` is run to completion and `compile` checked.
const FULL_CHECK_EVERY: usize = 4;

pub fn catch_up(mut rng: StdRng, wanted: usize) -> Row {
    let encoder = evicortex::load_pinned_encoder(Overlength::Refuse)
        .expect("the pinned encoder (run `evicortex model fetch`)");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut row = Row::new();
    let mut window = Window::new(800.0, 20.0, 20_000.0);
    // Every text appended so far, with the vector this process computes for it.
    let mut reference: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let texts: Vec<String> = (0..RUN_TURNS)
            .map(|t| {
                format!(
                    "run {run} note {t}: the {} {} was moved to shelf {}",
                    ["red", "green", "blue", "amber", "grey"][rng.random_range(0..5)],
                    ["lamp", "kettle", "ledger", "violin", "atlas"][rng.random_range(0..5)],
                    rng.random_range(0..10_000)
                )
            })
            .collect();
        let lines: Vec<_> = texts
            .iter()
            .enumerate()
            .map(|(t, text)| {
                json!({"namespace": NAMESPACE, "session": format!("run{run}"), "turn": t,
                    "role": "user", "text": text, "time": "2024-03-01T00:00:00Z"})
            })
            .collect();
        Memory::open(&store).unwrap().append(&turns(&lines)).unwrap();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for (text, embedded) in
            texts.iter().zip(encoder.embed(EmbeddingRole::Document, &refs).unwrap())
        {
            reference.insert(text.clone(), embedded.windows[0].vector.clone());
        }
        let cached_before = check_cache(&store, &reference, run);

        let mut child = command(&store, &["embed", "--chunk-texts", CHUNK])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (running, status) = kill_after(&mut child, window.sample(&mut rng));
        assert!(running || status.success(), "run {run}: embed failed: {status}");
        let cached_after = check_cache(&store, &reference, run);
        ok(&store, &["verify"]);
        if run % FULL_CHECK_EVERY == FULL_CHECK_EVERY - 1 {
            finish_and_check(&store, &reference, cached_after, run);
        }

        let pending = reference.len() - cached_before;
        if running {
            row.kill(match cached_after - cached_before {
                0 => "before the first chunk's commit",
                n if n < pending => "between chunk commits",
                _ => "after the last commit, before exit",
            });
            window.scale(if cached_after == cached_before { 1.25 } else { 1.0 });
        } else {
            assert_eq!(cached_after, reference.len(), "run {run}: embed exited 0 with texts left");
            row.completed += 1;
            window.scale(0.8);
        }
        run += 1;
    }
    let cached = check_cache(&store, &reference, run);
    finish_and_check(&store, &reference, cached, run);
    row
}

/// Runs `embed` to completion: it embeds exactly the texts not yet cached, after which every
/// text has its vector and `compile` works with dense retrieval.
fn finish_and_check(
    store: &Path,
    reference: &BTreeMap<String, Vec<f32>>,
    cached: usize,
    run: usize,
) {
    let rerun = ok(store, &["embed", "--chunk-texts", CHUNK]);
    let expected = format!("embedded {} texts", reference.len() - cached);
    assert!(
        rerun.starts_with(&expected),
        "run {run}: {cached} of {} texts were cached; the rerun said: {rerun}",
        reference.len()
    );
    assert_eq!(check_cache(store, reference, run), reference.len(), "run {run}: texts left");
    check_compile(store, reference.keys().next().unwrap());
}

/// Every cached text has exactly one vector (window 0), equal to this process's within float
/// noise (batches of different composition may round differently); returns how many are cached.
fn check_cache(store: &Path, reference: &BTreeMap<String, Vec<f32>>, run: usize) -> usize {
    let texts: Vec<String> = reference.keys().cloned().collect();
    let rows = cached(store, &texts);
    for (text, got) in &rows {
        assert_eq!(got.len(), 1, "run {run}: {} vectors for {text:?}", got.len());
        assert_eq!(got[0].0, 0, "run {run}: window index of {text:?}");
        let want = &reference[text];
        assert_eq!(got[0].1.len(), want.len(), "run {run}: dimension of {text:?}");
        let worst = got[0].1.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "run {run}: the cached vector of {text:?} differs by {worst}");
    }
    rows.len()
}

/// The cache rows of `texts`: digest of the text to (window, vector), read from the file.
fn cached(store: &Path, texts: &[String]) -> BTreeMap<String, Vec<(i64, Vec<f32>)>> {
    let path = store.join(evicortex::EMBEDDINGS_FILE);
    let mut out: BTreeMap<String, Vec<(i64, Vec<f32>)>> = BTreeMap::new();
    if !path.exists() {
        return out;
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt =
        conn.prepare("SELECT window_index, vector FROM vectors WHERE text_digest = ?1").unwrap();
    for text in texts {
        let digest = TextDigest::of(text);
        let rows = stmt
            .query_map([digest.as_bytes().as_slice()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .unwrap();
        for row in rows {
            let (window, blob) = row.unwrap();
            let vector =
                blob.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            out.entry(text.clone()).or_default().push((window, vector));
        }
    }
    out
}

fn check_compile(store: &Path, text: &str) {
    let out = ok(
        store,
        &[
            "compile",
            "--namespace",
            NAMESPACE,
            "--query",
            text,
            "--budget",
            "300",
            "--reader-tokenizer",
            "o200k_base",
            "--json",
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["config"]["dense"]["mode"], "on", "{json}");
    let first = &json["items"][0];
    assert_eq!(first["text"].as_str(), Some(text), "the turn itself comes first: {json}");
    assert!(!first["dense"].is_null(), "the turn is a dense candidate: {first}");
}
