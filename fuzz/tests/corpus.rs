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
