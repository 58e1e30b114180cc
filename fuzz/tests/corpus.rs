//! The committed inputs of every fuzz target, run through the target's body as ordinary tests:
//! the seeds (`seeds/TARGET`) and every input a fuzzing run found failing (`regressions/TARGET`),
//! so a fixed finding stays fixed without libFuzzer or the instrumented build.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use evicortex_fuzz::TARGETS;

/// The files of `folder` (none when it does not exist), sorted.
fn inputs(folder: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs_err::read_dir(folder) else { return Vec::new() };
    let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

/// Runs every committed input of `target`; fails naming each input whose run panicked.
fn check(target: &str) {
    let run = TARGETS.iter().find(|(name, _)| *name == target).expect("a known target").1;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = inputs(&root.join("seeds").join(target));
    assert!(!seeds.is_empty(), "{target} has no committed seeds");
    let regressions = inputs(&root.join("regressions").join(target));
    let mut failed = Vec::new();
    for path in seeds.iter().chain(&regressions) {
        let data = fs_err::read(path).unwrap();
        if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failed.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: these committed inputs fail: {failed:?}");
}

#[test]
fn every_target_has_a_corpus_test() {
    let names: Vec<_> = TARGETS.iter().map(|(name, _)| *name).collect();
    let manifest =
        fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for name in &names {
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name} has no fuzz binary");
    }
    let this = include_str!("corpus.rs");
    for name in &names {
        assert!(this.contains(&format!("fn {name}()")), "{name} has no test in corpus.rs");
    }
}

#[test]
fn jsonl() {
    check("jsonl");
}

#[test]
fn longmemeval() {
    check("longmemeval");
}

#[test]
fn locomo() {
    check("locomo");
}

#[test]
fn http_bodies() {
    check("http_bodies");
}

#[test]
fn mcp_messages() {
    check("mcp_messages");
}

#[test]
fn reader_tokens() {
    check("reader_tokens");
}

#[test]
fn encoder_tokens() {
    check("encoder_tokens");
}

#[test]
fn ledger_records() {
    check("ledger_records");
}

#[test]
fn postgres_records() {
    check("postgres_records");
}

#[test]
fn lexical_index_file() {
    check("lexical_index_file");
}

#[test]
fn graph_file() {
    check("graph_file");
}

#[test]
fn embedding_cache_rows() {
    check("embedding_cache_rows");
}

#[test]
fn compile_options() {
    check("compile_options");
}

/// Writes the seeds that are files of the product's own formats, with the product's writers:
/// `cargo test -p evicortex-fuzz --test corpus -- --ignored write_file_seeds`. The checksum the
/// writers end each file with is cut off: the targets append it themselves.
#[test]
#[ignore = "writes fuzz/seeds; run by hand after a format change"]
fn write_file_seeds() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let body = |path: &Path| {
        let bytes = fs_err::read(path).unwrap();
        bytes[..bytes.len() - 32].to_vec()
    };
    for (name, config) in [
        ("default", evicortex::CompileConfig::default_for(false)),
        ("hybrid", evicortex::CompileConfig::hybrid(10, evicortex::DenseConfig::Off)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let memory =
            evicortex::Memory::builder(dir.path()).lexical_files_from(Some(1)).open().unwrap();
        let lines = [
            r#"{"namespace":"a","session":"s1","turn":0,"role":"user","text":"I moved to Lisbon in May.","time":"2024-05-02T10:00:00+01:00"}"#,
            r#"{"namespace":"a","session":"s1","turn":1,"role":"assistant","text":"We adopted a beagle named Max; Max loves the park.","time":"2024-05-02T10:00:05+01:00"}"#,
            r#"{"namespace":"a","session":"s2","turn":0,"role":"user","text":"My sister visits in June, painting and paints.","time":"2024-06-01T09:00:00Z"}"#,
        ];
        let turns =
            evicortex::parse_jsonl("seed", lines.join("\n").as_bytes(), &Default::default())
                .unwrap();
        memory.append(&turns).unwrap();
        let query = evicortex::CompileQuery {
            namespace: evicortex::Namespace::new("a").unwrap(),
            question: "Where did I move?".to_owned(),
            as_of: None,
            budget: evicortex::TokenBudget::new(500),
        };
        let reader = evicortex::reader_tokenizer("o200k_base").unwrap();
        let request = evicortex::CompileRequest {
            query: &query,
            config: &config,
            reader: reader.as_ref(),
            query_vectors: &[],
        };
        memory.compile(&request).unwrap();
        let files: Vec<_> = fs_err::read_dir(dir.path().join(evicortex::LEXICAL_INDEX_DIR))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "one lexical index file");
        fs_err::write(seeds.join("lexical_index_file").join(name), body(&files[0])).unwrap();
    }

    use evicortex_vector::{
        ExactIndex, HnswIndex, HnswParams, IndexFileMeta, VectorIndex, WindowedIndex,
    };
    let params = HnswParams { m: 4, ef_construction: 8, ef_search: 8, seed: 7 };
    let meta =
        IndexFileMeta { namespace: evicortex::Namespace::new("a").unwrap(), encoder: [7; 32] };
    let vector = |i: u64| -> Vec<f32> {
        let v: Vec<f32> = (0..4).map(|d| ((i * 7 + d * 3) % 5) as f32 - 2.0).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut windows = ExactIndex::new(4);
    for i in 1..=10u64 {
        for w in 0..(1 + u32::from(i % 3 == 0)) {
            windows
                .insert((evicortex::TurnId::from_raw(i), w), &vector(i * 2 + u64::from(w)))
                .unwrap();
        }
    }
    windows.mark_covered(evicortex::TurnId::from_raw(10)).unwrap();
    let mut windowed = WindowedIndex::new(windows);
    windowed.build_hnsw(params, &mut |_, _| {}).unwrap();
    let path = dir.path().join("windows.hnsw");
    windowed.save_hnsw(&path, &meta).unwrap();
    fs_err::write(seeds.join("graph_file").join("windows"), body(&path)).unwrap();
    let mut turns = ExactIndex::new(4);
    for i in 1..=6u64 {
        turns.insert(evicortex::TurnId::from_raw(i), &vector(i)).unwrap();
    }
    turns.mark_covered(evicortex::TurnId::from_raw(6)).unwrap();
    let graph = HnswIndex::build(turns, params, &mut |_, _| {}).unwrap();
    let path = dir.path().join("turns.hnsw");
    graph.save(&path, &meta).unwrap();
    fs_err::write(seeds.join("graph_file").join("turns"), body(&path)).unwrap();
}
