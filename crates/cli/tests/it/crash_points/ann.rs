//! The HNSW index file (opt-in ANN) killed while it is built, written or loaded. The `evicortex`
//! binary has no switch for the ANN index (it is reachable through `MemoryBuilder::ann` only),
//! so the killed process is this test binary re-run as a child: it opens the store with the
//! graph from the first vector on and compiles one query, which builds the graph and writes its
//! file (or loads the file left by an earlier run). Before each child the index folder holds no
//! file, the complete file, or a truncated one (what a file system without atomic rename could
//! leave). After the kill the store is opened again with the same settings in this process: the
//! compiled context equals a clean run's byte for byte (the graph is deterministic), the file
//! is then the clean run's file exactly, and no temporary file of a killed writer is left over.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use evicortex::{
    AnnSettings, CatchUpLimits, CompileConfig, CompileQuery, CompileRequest, DenseConfig, Encoder,
    Memory, Namespace, Overlength, TokenBudget, VECTOR_INDEX_DIR,
};
use rand::{Rng, rngs::StdRng};
use serde_json::json;

use super::{Row, Window, erase::turns};

const NAMESPACE: &str = "ann";
const TURNS: usize = 200;
const QUESTION: &str = "where was the violin moved?";
/// Set to the store's path in the child's environment.
const CHILD_ENV: &str = "EVICORTEX_CRASH_ANN_CHILD";
const TEST_NAME: &str =
    "crash_points::sigkill_at_random_points_beyond_ingest_keeps_every_guarantee";

pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The killed child: compile once with the graph on, then exit.
pub fn child_main() -> ! {
    let store = PathBuf::from(std::env::var_os(CHILD_ENV).unwrap());
    let encoder = evicortex::load_pinned_encoder(Overlength::Refuse).unwrap();
    compile_json(&store, &encoder);
    std::process::exit(0)
}

fn settings() -> Option<AnnSettings> {
    Some(AnnSettings { threshold: 1, ..AnnSettings::default() })
}

/// Opens `store` with the graph on and returns the compiled context as JSON.
fn compile_json(store: &Path, encoder: &Arc<dyn Encoder>) -> String {
    let memory =
        Memory::builder(store).encoder(Arc::clone(encoder)).ann(settings()).open().unwrap();
    let reader = evicortex::reader_tokenizer("o200k_base").unwrap();
    let query = CompileQuery {
        namespace: Namespace::new(NAMESPACE).unwrap(),
        question: QUESTION.to_owned(),
        as_of: None,
        budget: TokenBudget::new(400),
    };
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 50 });
    let context = memory
        .compile(&CompileRequest {
            query: &query,
            config: &config,
            reader: &*reader,
            query_vectors: &[],
        })
        .unwrap();
    serde_json::to_string(&context).unwrap()
}

pub fn index_persistence(mut rng: StdRng, wanted: usize) -> Row {
    let encoder = evicortex::load_pinned_encoder(Overlength::Refuse)
        .expect("the pinned encoder (run `evicortex model fetch`)");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let index_dir = store.join(VECTOR_INDEX_DIR);
    let lines: Vec<_> = (0..TURNS)
        .map(|t| {
            json!({"namespace": NAMESPACE, "session": format!("s{}", t / 10), "turn": t % 10,
                "role": "user", "time": "2024-04-01T00:00:00Z",
                "text": format!("note {t}: the {} was moved to room {}",
                    ["violin", "kettle", "atlas", "lamp", "ledger", "clock"][t % 6], t * 7 % 101)})
        })
        .collect();
    {
        let memory = Memory::builder(&store).encoder(Arc::clone(&encoder)).open().unwrap();
        memory.append(&turns(&lines)).unwrap();
        memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();
    }
    // The clean run: its context, and the file it wrote.
    let reference = compile_json(&store, &encoder);
    assert!(reference.contains("\"hnsw\""), "the graph must serve: {reference}");
    let (file, reference_bytes) = only_index_file(&index_dir);

    let mut row = Row::new();
    let mut window = Window::new(1_000.0, 20.0, 30_000.0);
    // How long a child that builds and writes the file runs; measured by the first run, which
    // is not killed.
    let mut build_run: Option<Duration> = None;
    let mut run = 0;
    while row.kills < wanted {
        row.check_progress(run, wanted);
        let start = match if build_run.is_none() { 0 } else { rng.random_range(0..10) } {
            0..6 => {
                fs_err::remove_file(&file).unwrap();
                "no file"
            }
            6..8 => "the complete file",
            _ => {
                let cut = rng.random_range(1..reference_bytes.len());
                fs_err::write(&file, &reference_bytes[..cut]).unwrap();
                "a truncated file"
            }
        };
        let spawned = Instant::now();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The file is written at the end of a child's run, in a few milliseconds: most kills
        // are aimed at the end of a typical run that builds, the others spread over the run.
        let delay = match build_run {
            None => {
                child.wait().unwrap();
                Duration::ZERO
            }
            Some(typical) if start == "no file" && rng.random_bool(0.6) => {
                typical.mul_f64(rng.random_range(0.85..1.02))
            }
            Some(_) => window.sample(&mut rng),
        };
        std::thread::sleep(delay.saturating_sub(spawned.elapsed()));
        let running = child.try_wait().unwrap().is_none();
        let at_kill = IndexState::read(&index_dir, &file, &reference_bytes);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(running || status.success(), "run {run}: the child failed: {status}");

        let context = compile_json(&store, &encoder);
        assert_eq!(context, reference, "run {run} (started with {start}): a different context");
        let (after, bytes) = only_index_file(&index_dir);
        assert_eq!(after, file);
        assert!(bytes == reference_bytes, "run {run} (started with {start}): a different file");

        if running {
            row.kill(match (start, at_kill) {
                ("the complete file", _) => "loading the complete file",
                (_, IndexState::Writing) => "while the file was written",
                (_, IndexState::Written) => "after the file was written",
                (_, IndexState::Before) => "before the write (open, build)",
            });
            window.scale(if at_kill == IndexState::Before { 1.1 } else { 1.0 });
        } else {
            if start == "no file" {
                let took = spawned.elapsed();
                build_run = Some(build_run.map_or(took, |t| t.mul_f64(0.7) + took.mul_f64(0.3)));
            }
            row.completed += 1;
            window.scale(0.8);
        }
        run += 1;
    }
    row
}

#[derive(PartialEq, Clone, Copy)]
enum IndexState {
    /// No new file yet: the complete one absent (or still the truncated one).
    Before,
    /// A temporary file of the writer exists.
    Writing,
    /// The file is in place, complete.
    Written,
}

impl IndexState {
    fn read(index_dir: &Path, file: &Path, reference: &[u8]) -> IndexState {
        let temporary = fs_err::read_dir(index_dir)
            .map(|entries| {
                entries.flatten().any(|e| e.path().extension().is_some_and(|x| x == "tmp"))
            })
            .unwrap_or(false);
        if temporary {
            IndexState::Writing
        } else if fs_err::read(file).is_ok_and(|bytes| bytes == reference) {
            IndexState::Written
        } else {
            IndexState::Before
        }
    }
}

/// The one file in the index folder (a temporary file left by a killed writer is a failure).
fn only_index_file(index_dir: &Path) -> (PathBuf, Vec<u8>) {
    let files: Vec<PathBuf> =
        fs_err::read_dir(index_dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "the index folder must hold one file: {files:?}");
    let bytes = fs_err::read(&files[0]).unwrap();
    (files[0].clone(), bytes)
}
