//! The lexical index files on the backend `EVICORTEX_TEST_BACKEND` names (a PostgreSQL store
//! keeps them in its derived directory): the next process loads the file and compiles what a
//! memory that keeps no file compiles, after appends too; an erasure removes the file, and what
//! is written after it holds only the live turns.

use std::{os::unix::fs::MetadataExt, path::PathBuf};

use evicortex::{
    CompileConfig, DenseConfig, EraseTarget, IngestOptions, LEXICAL_INDEX_DIR, Memory, Namespace,
    TurnId, parse_jsonl,
};

use crate::{incremental_indexes::compile_alice, test_store::TestStore};

const QUESTIONS: [&str; 3] = ["Where is the cello lesson?", "beagle named Max", "Lisbon move"];

fn turn(i: usize) -> String {
    let topics = ["a beagle named Max", "the cello lesson downtown", "the move to Lisbon"];
    format!(
        r#"{{"namespace":"alice","session":"s{}","turn":{},"role":"user","text":"Turn {i}: {} on day {}.","time":"2024-06-01T09:{:02}:00Z"}}"#,
        i % 4,
        i / 4,
        topics[i % 3],
        i % 13,
        i % 60
    )
}

fn append(memory: &Memory, range: std::ops::Range<usize>) {
    let lines: Vec<String> = range.map(turn).collect();
    let turns =
        parse_jsonl("test", lines.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();
}

fn compile(memory: &Memory, question: &str) -> String {
    let config = CompileConfig::default_with(10, DenseConfig::Off);
    serde_json::to_string(&compile_alice(memory, question, &config, 150).unwrap()).unwrap()
}

fn open(store: &TestStore, from: Option<usize>) -> Memory {
    store.builder().lexical_files_from(from).open().unwrap()
}

fn files(store: &TestStore) -> Vec<PathBuf> {
    match fs_err::read_dir(store.files_dir().join(LEXICAL_INDEX_DIR)) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn only_file_inode(store: &TestStore) -> u64 {
    let files = files(store);
    assert_eq!(files.len(), 1, "{files:?}");
    fs_err::metadata(&files[0]).unwrap().ino()
}

#[test]
fn the_next_process_loads_the_lexical_file_and_an_erasure_removes_it() {
    let store = TestStore::new();
    let first = open(&store, Some(16));
    append(&first, 0..40);
    compile(&first, QUESTIONS[0]);
    let written = only_file_inode(&store);
    drop(first);

    let reopened = open(&store, Some(16));
    append(&reopened, 40..43);
    let plain = open(&store, None);
    for question in QUESTIONS {
        assert_eq!(compile(&reopened, question), compile(&plain, question), "{question}");
    }
    assert_eq!(only_file_inode(&store), written, "loaded and extended, not written again");

    reopened
        .erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), TurnId::from_raw(2)))
        .unwrap();
    assert!(files(&store).is_empty(), "the erasure removed the file");
    let after = compile(&reopened, QUESTIONS[0]);
    assert_eq!(files(&store).len(), 1, "rebuilt from the live turns and written");
    drop(reopened);
    let again = open(&store, Some(16));
    let plain = open(&store, None);
    for question in QUESTIONS {
        assert_eq!(compile(&again, question), compile(&plain, question), "{question}");
    }
    assert_eq!(compile(&again, QUESTIONS[0]), after);
}
