//! Lexical index files on a real store: written once a namespace is large enough, loaded by the
//! next process instead of rebuilt (with the same compiled context as a store that keeps none),
//! rebuilt when damaged, and gone with every erasure of the namespace.

use std::path::{Path, PathBuf};

use evicortex_compiler::{
    CompileConfig, CompileQuery, CompiledContext, DenseConfig, TiktokenReader,
};
use evicortex_core::{Namespace, TokenBudget};

use super::*;
use crate::{CompileRequest, EraseTarget, IngestOptions, Memory, parse_jsonl};

fn alice() -> Namespace {
    Namespace::new("alice").unwrap()
}

/// Turn `i`: three sessions whose turns interleave in ledger order.
fn turn(i: usize) -> String {
    let topics = ["a beagle named Max", "the cello lessons", "moving to Lisbon", "the marathon"];
    format!(
        r#"{{"namespace":"alice","session":"s{}","turn":{},"role":"user","text":"Turn {i} is about {} and day {}.","time":"2024-05-01T10:{:02}:00Z"}}"#,
        i % 3,
        i / 3,
        topics[(i / 2) % 4],
        i % 11,
        i % 60
    )
}

fn append(memory: &Memory, range: std::ops::Range<usize>) {
    let lines: Vec<String> = range.map(turn).collect();
    let turns =
        parse_jsonl("test", lines.join("\n").as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();
}

fn open(dir: &Path, from: Option<usize>) -> Memory {
    Memory::builder(dir).lexical_files_from(from).open().unwrap()
}

fn compile(memory: &Memory, question: &str) -> String {
    let reader = TiktokenReader::o200k_base();
    let query = CompileQuery {
        namespace: alice(),
        question: question.to_owned(),
        as_of: None,
        budget: TokenBudget::new(150),
    };
    // The committed default's lexical settings: the cached turn index and a window index.
    let config = CompileConfig::default_with(10, DenseConfig::Off);
    let request =
        CompileRequest { query: &query, config: &config, reader: &reader, query_vectors: &[] };
    let context: CompiledContext = memory.compile(&request).unwrap();
    serde_json::to_string(&context).unwrap()
}

const QUESTIONS: [&str; 3] = ["What is the beagle called?", "cello lessons", "Lisbon marathon"];

fn file(dir: &Path) -> PathBuf {
    file_path(&dir.join(LEXICAL_INDEX_DIR), &alice())
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs_err::metadata(path).unwrap().ino()
}

/// Turns the file this memory loaded or wrote holds (`None`: it built its indexes itself).
fn saved(memory: &Memory) -> Option<usize> {
    let slot = memory.inner.indexes.slot(&alice());
    let indexes = slot.read().unwrap();
    assert!(indexes.window.is_some(), "the default compile has a window index");
    indexes.lexical_saved()
}

/// Panics unless `memory` compiles every question as a store over `dir` that keeps no lexical
/// files does; returns that store.
fn assert_compiles_as_plain(dir: &Path, memory: &Memory) -> Memory {
    let plain = open(dir, None);
    for question in QUESTIONS {
        assert_eq!(compile(memory, question), compile(&plain, question), "{question}");
    }
    plain
}

#[test]
fn the_next_process_loads_the_file_and_compiles_as_a_store_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path(), Some(40));
    append(&first, 0..30);
    compile(&first, QUESTIONS[0]);
    assert!(!file(dir.path()).exists(), "30 turns, below the 40 asked for");
    append(&first, 30..48);
    compile(&first, QUESTIONS[0]);
    assert!(file(dir.path()).exists());
    assert_eq!(saved(&first), Some(48));
    drop(first);
    let written = inode(&file(dir.path()));

    let reopened = open(dir.path(), Some(40));
    let plain = assert_compiles_as_plain(dir.path(), &reopened);
    assert_eq!(saved(&reopened), Some(48));
    assert_eq!(inode(&file(dir.path())), written, "loaded, not rebuilt and written again");
    assert_eq!(saved(&plain), None);

    // Appended turns extend what was loaded; a growth of an eighth or less is not written.
    append(&reopened, 48..52);
    assert_compiles_as_plain(dir.path(), &reopened);
    assert_eq!(inode(&file(dir.path())), written, "grown by 4 of 48: not written");
    append(&reopened, 52..60);
    compile(&reopened, QUESTIONS[1]);
    assert_eq!(saved(&reopened), Some(60), "grown by a quarter: written again");
    let rewritten = inode(&file(dir.path()));
    assert_ne!(rewritten, written);
    let again = open(dir.path(), Some(40));
    assert_compiles_as_plain(dir.path(), &again);
    assert_eq!(saved(&again), Some(60));
    assert_eq!(inode(&file(dir.path())), rewritten, "loaded");
}

#[test]
fn a_damaged_file_is_rebuilt_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), Some(1));
    append(&memory, 0..20);
    let expected = compile(&memory, QUESTIONS[2]);
    drop(memory);
    let path = file(dir.path());
    let mut bytes = fs_err::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs_err::write(&path, &bytes).unwrap();

    let memory = open(dir.path(), Some(1));
    assert_eq!(compile(&memory, QUESTIONS[2]), expected);
    assert_eq!(saved(&memory), Some(20), "rebuilt, then written afresh");
    assert_ne!(fs_err::read(&path).unwrap(), bytes);
    let rewritten = inode(&path);
    drop(memory);
    let memory = open(dir.path(), Some(1));
    assert_eq!(compile(&memory, QUESTIONS[2]), expected);
    assert_eq!(inode(&path), rewritten, "the rewritten file loads");
}

#[test]
fn an_erasure_removes_the_file_and_an_older_copy_is_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), Some(1));
    append(&memory, 0..20);
    let path = file(dir.path());
    let before_erasure = written_then_erased(&memory, &path);
    assert!(!path.exists(), "the erasure removed the file");
    let after = compile(&memory, QUESTIONS[0]);
    assert!(path.exists(), "written again after the erasure");
    drop(memory);

    // A copy from before the erasure (an interrupted purge, say) is removed on open.
    fs_err::write(&path, &before_erasure).unwrap();
    let memory = open(dir.path(), Some(1));
    assert!(!path.exists(), "removed on open");
    assert_eq!(compile(&memory, QUESTIONS[0]), after);
    drop(memory);

    // And one put back while a process runs is refused at load.
    let memory = open(dir.path(), Some(1));
    fs_err::write(&path, &before_erasure).unwrap();
    assert_eq!(compile(&memory, QUESTIONS[0]), after);
    assert_eq!(saved(&memory), Some(19), "rebuilt from the 19 live turns and written");
    assert_ne!(fs_err::read(&path).unwrap(), before_erasure);
    drop(memory);

    // A memory that keeps no lexical file still removes the one there when it erases.
    let plain = open(dir.path(), None);
    plain.erase(&EraseTarget::Record(alice(), evicortex_core::TurnId::from_raw(5))).unwrap();
    assert!(!path.exists());
}

#[test]
fn an_erasure_removes_files_only_once_no_writer_holds_the_index_files_lock() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), Some(1));
    append(&memory, 0..20);
    compile(&memory, QUESTIONS[0]);
    let path = file(dir.path());
    assert!(path.exists());
    // What another process's writer holds between its erasure check and its rename.
    let held = memory.inner.indexes.lock_files().unwrap().expect("a store directory");
    removes_only_once_released(held, &path, || {
        memory.erase(&EraseTarget::Record(alice(), evicortex_core::TurnId::from_raw(3))).unwrap();
    });
}

/// Runs `remove` (which removes the file at `path`) beside the held index files' lock: it waits,
/// leaving the file, until the lock is released, and then removes it.
fn removes_only_once_released(held: impl Send, path: &Path, remove: impl FnOnce() + Send) {
    let (done, removed) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            remove();
            done.send(()).unwrap();
        });
        let waited = removed.recv_timeout(std::time::Duration::from_millis(300));
        assert!(waited.is_err(), "the removal waits for the lock");
        assert!(path.exists(), "nothing removed while the lock is held");
        drop(held);
        removed.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
    });
    assert!(!path.exists(), "removed once the lock is free");
}

/// The sweep at open takes the index files' lock too: a stale file (from before an erasure) is
/// removed only once no writer holds it, so the sweep never removes a file that a process
/// beside it renames into place between the sweep's check and its removal.
#[test]
fn the_sweep_at_open_removes_a_stale_file_only_once_no_writer_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), Some(1));
    append(&memory, 0..20);
    let path = file(dir.path());
    let before_erasure = written_then_erased(&memory, &path);
    drop(memory);
    fs_err::write(&path, &before_erasure).unwrap();
    // What another process's writer holds between its erasure check and its rename.
    let held = fs_err::File::open(dir.path().join(crate::index_cache::INDEX_FILES_LOCK)).unwrap();
    held.lock().unwrap();
    removes_only_once_released(held, &path, || drop(open(dir.path(), Some(1))));
}

/// Compiles (writing the file at `path`), then erases record 3; returns the file as it was
/// before the erasure.
fn written_then_erased(memory: &Memory, path: &Path) -> Vec<u8> {
    compile(memory, QUESTIONS[0]);
    let before_erasure = fs_err::read(path).unwrap();
    memory.erase(&EraseTarget::Record(alice(), evicortex_core::TurnId::from_raw(3))).unwrap();
    before_erasure
}

/// Waits (a bounded while) until `check` holds.
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_writes_the_file_off_the_request_path_once_the_namespace_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = Duration::from_millis(300);
    let memory = Memory::builder(dir.path())
        .lexical_files_from(Some(40))
        .lexical_files_when_quiet(Some(quiet))
        .open()
        .unwrap();
    append(&memory, 0..48);
    let started = std::time::Instant::now();
    compile(&memory, QUESTIONS[0]);
    if started.elapsed() < quiet {
        assert!(!file(dir.path()).exists(), "not written by the compile");
    }
    eventually("the file written once quiet", || saved(&memory) == Some(48));
    assert!(file(dir.path()).exists());

    // Appends keep the namespace busy: each compile's refresh restarts the quiet period.
    append(&memory, 48..60);
    compile(&memory, QUESTIONS[1]);
    eventually("the grown file written", || saved(&memory) == Some(60));

    // The next process loads what the background write left, as a compile's own write.
    drop(memory);
    let reopened = open(dir.path(), Some(40));
    let plain = open(dir.path(), None);
    assert_eq!(compile(&reopened, QUESTIONS[0]), compile(&plain, QUESTIONS[0]));
    assert_eq!(saved(&reopened), Some(60));
}
