//! `evicortex compile` killed while it writes derived files: on a namespace of more than
//! `DEFAULT_LEXICAL_FILES_FROM` turns, with dense retrieval and the HNSW graph on (`--ann-from 1
//! --ann-index graph`), a compile holding the store's lock embeds the namespace's pending turns,
//! then writes the lexical index file and the graph file. Before each run the store holds no
//! index file, stale ones (turns appended since, not yet embedded), the complete ones, or a
//! truncated one (what a file system without atomic rename could leave). The writes take
//! milliseconds at the end of a run of seconds: most runs that start with no file are killed a
//! random few milliseconds after the temporary file of one writer (picked at random) appears,
//! the others at a random moment. After the kill,
//! `verify` passes, the next compile runs to its end and leaves no temporary file, and its
//! context equals, byte for byte, that of a clean copy of the store (its ledger and embedding
//! cache without index files) compiled from scratch; so do the index files after a run that
//! started with none.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use evicortex::{CatchUpLimits, LEXICAL_INDEX_DIR, Memory, Overlength, VECTOR_INDEX_DIR};
use rand::{Rng, rngs::StdRng};
use serde_json::json;

use super::{Row, Window, erase::turns};
use crate::cli::{command, ok};

const NAMESPACE: &str = "derived";
/// Above `DEFAULT_LEXICAL_FILES_FROM`, so the lexical index file is written.
const TURNS: usize = evicortex::DEFAULT_LEXICAL_FILES_FROM + 52;
/// Turns appended (unembedded) before a run that starts with stale files.
const APPENDED: usize = 4;
const NO_FILE: &str = "no file";
const STALE: &str = "stale files, turns to embed";
const COMPLETE: &str = "the complete files";
const COMPILE: &[&str] = &[
    "compile",
    "--namespace",
    NAMESPACE,
    "--query",
    "where was the violin moved?",
    "--budget",
    "400",
    "--reader-tokenizer",
    "o200k_base",
    "--ann-from",
    "1",
    "--ann-index",
    "graph",
    "--json",
];

pub fn derived_files(mut rng: StdRng, wanted: usize) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let lines: Vec<_> = (0..TURNS).map(|t| line(t, "")).collect();
    {
        let encoder = evicortex::load_pinned_encoder(Overlength::Refuse)
            .expect("the pinned encoder (run `evicortex model fetch`)");
        let memory = Memory::builder(&store).encoder(encoder).open().unwrap();
        memory.append(&turns(&lines)).unwrap();
        memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    }
    let mut reference = Reference::compute(&store, dir.path());
    ok(&store, COMPILE);

    let mut row = Row::new();
    let mut window = Window::new(3_000.0, 50.0, 60_000.0);
    // From a temporary file's appearance to the kill of an aimed run.
    let mut in_write = Window::new(5.0, 0.1, 500.0);
    let mut appended = 0;
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let start = match rng.random_range(0..10) {
            0..5 => {
                for file in index_files(&store) {
                    fs_err::remove_file(file).unwrap();
                }
                NO_FILE
            }
            5..7 => {
                let lines: Vec<_> = (0..APPENDED)
                    .map(|t| line(TURNS + appended + t, &format!(" (run {run})")))
                    .collect();
                Memory::open(&store).unwrap().append(&turns(&lines)).unwrap();
                appended += APPENDED;
                STALE
            }
            7..8 => COMPLETE,
            _ => {
                let files = index_files(&store);
                let file = &files[rng.random_range(0..files.len())];
                let bytes = fs_err::read(file).unwrap();
                fs_err::write(file, &bytes[..rng.random_range(1..bytes.len())]).unwrap();
                "a truncated file"
            }
        };
        let before = inodes(&store);
        let mut child =
            command(&store, COMPILE).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // The files are written at the end of a run of seconds, in milliseconds: most runs
        // that start with none are killed a random few milliseconds after a writer's temporary
        // file appears, the others at a random moment of the run.
        let aimed = start == NO_FILE && rng.random_bool(0.6);
        if aimed {
            let folder = [LEXICAL_INDEX_DIR, VECTOR_INDEX_DIR][rng.random_range(0..2)];
            if temporary_appears(&store.join(folder), &mut child) {
                std::thread::sleep(in_write.sample(&mut rng));
            }
        } else {
            std::thread::sleep(window.sample(&mut rng));
        }
        let running = child.try_wait().unwrap().is_none();
        let at_kill = FilesState::read(&store, &before);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(running || status.success(), "run {run}: compile failed: {status}");

        ok(&store, &["verify"]);
        let context = ok(&store, COMPILE);
        let left: Vec<PathBuf> =
            index_entries(&store).into_iter().filter(|p| is_temporary(p)).collect();
        assert!(left.is_empty(), "run {run}: temporary files left after a compile: {left:?}");
        if start == STALE {
            reference = Reference::compute(&store, dir.path());
        }
        reference.check(&store, &context, run, start);

        if aimed {
            in_write.scale(if matches!(at_kill, FilesState::Writing(_)) { 1.05 } else { 0.8 });
        }
        if running {
            row.kill(match (start, at_kill) {
                (_, FilesState::Writing(file)) => file,
                (_, FilesState::Written) => "after a file was written",
                (COMPLETE, FilesState::Before) => "loading the complete files",
                (STALE, FilesState::Before) => "before writing, turns to embed (catch-up, build)",
                (_, FilesState::Before) => "before writing (open, build)",
            });
            if !aimed {
                window.scale(if at_kill == FilesState::Before { 1.1 } else { 1.0 });
            }
        } else {
            row.completed += 1;
            if !aimed {
                window.scale(0.8);
            }
        }
        run += 1;
    }
    row
}

/// Turn `t` of the namespace.
fn line(t: usize, suffix: &str) -> serde_json::Value {
    json!({"namespace": NAMESPACE, "session": format!("s{}", t / 10), "turn": t % 10,
        "role": "user", "time": "2024-04-01T00:00:00Z",
        "text": format!("note {t}: the {} was moved to room {}{suffix}",
            ["violin", "kettle", "atlas", "lamp", "ledger", "clock"][t % 6], t * 7 % 101)})
}

/// What a clean copy of the store compiles, and the index files it writes.
struct Reference {
    context: String,
    files: Vec<(String, Vec<u8>)>,
}

impl Reference {
    /// Copies `store` without its index folders into a new folder of `dir` and compiles there.
    fn compute(store: &Path, dir: &Path) -> Reference {
        let clean = tempfile::tempdir_in(dir).unwrap();
        copy_without_indexes(store, clean.path());
        let context = ok(clean.path(), COMPILE);
        Reference { context, files: named_files(clean.path()) }
    }

    /// The context is the clean copy's; so are the index files when the run started with none
    /// (a file extended with later turns holds the same indexes in another layout).
    fn check(&self, store: &Path, context: &str, run: usize, start: &str) {
        assert_eq!(context, self.context, "run {run} (started with {start}): a different context");
        if start != NO_FILE {
            return;
        }
        let files = named_files(store);
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&files), names(&self.files), "run {run} (started with {start})");
        for ((name, bytes), (_, clean)) in files.iter().zip(&self.files) {
            assert!(
                bytes == clean,
                "run {run} (started with {start}): {name} differs from a clean run's"
            );
        }
    }
}

fn copy_without_indexes(from: &Path, to: &Path) {
    for entry in fs_err::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_dir() {
            if name != LEXICAL_INDEX_DIR && name != VECTOR_INDEX_DIR {
                fs_err::create_dir(to.join(name)).unwrap();
                copy_without_indexes(&path, &to.join(name));
            }
        } else {
            fs_err::copy(&path, to.join(name)).unwrap();
        }
    }
}

/// Everything in the two index folders of `store`.
fn index_entries(store: &Path) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for folder in [LEXICAL_INDEX_DIR, VECTOR_INDEX_DIR] {
        if let Ok(entries) = fs_err::read_dir(store.join(folder)) {
            all.extend(entries.map(|e| e.unwrap().path()));
        }
    }
    all.sort();
    all
}

fn is_temporary(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "tmp")
}

/// The index files of `store`, temporary files left out.
fn index_files(store: &Path) -> Vec<PathBuf> {
    index_entries(store).into_iter().filter(|p| !is_temporary(p) && p.is_file()).collect()
}

/// The index files of `store` as (folder/name, bytes).
fn named_files(store: &Path) -> Vec<(String, Vec<u8>)> {
    index_files(store)
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(store).unwrap().to_string_lossy().into_owned();
            (name, fs_err::read(&p).unwrap())
        })
        .collect()
}

#[derive(PartialEq, Clone, Copy)]
enum FilesState {
    /// The index files are as they were before the run.
    Before,
    /// A temporary file of a writer exists: where the kill landed.
    Writing(&'static str),
    /// An index file was written (renamed into place) since the run started.
    Written,
}

impl FilesState {
    fn read(store: &Path, before: &[(PathBuf, u64)]) -> FilesState {
        if let Some(tmp) = index_entries(store).into_iter().find(|p| is_temporary(p)) {
            return FilesState::Writing(if tmp.parent().unwrap().ends_with(LEXICAL_INDEX_DIR) {
                "inside the lexical file's write"
            } else {
                "inside the graph file's write"
            });
        }
        // A file written since the start is a new one or a replaced one (renamed over: a new
        // inode).
        let written = inodes(store).iter().any(|file| !before.contains(file));
        if written { FilesState::Written } else { FilesState::Before }
    }
}

/// The index files of `store` with their inode numbers.
fn inodes(store: &Path) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    index_files(store)
        .into_iter()
        .filter_map(|p| Some((p.clone(), fs_err::metadata(&p).ok()?.ino())))
        .collect()
}

/// Waits until a temporary file of an index writer appears in `folder` (`true`) or `child`
/// exits.
fn temporary_appears(folder: &Path, child: &mut std::process::Child) -> bool {
    loop {
        let entries = fs_err::read_dir(folder).into_iter().flatten().flatten();
        if entries.map(|e| e.path()).any(|p| is_temporary(&p)) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
