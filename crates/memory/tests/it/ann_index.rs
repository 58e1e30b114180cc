//! The HNSW candidate layer behind compile, with the pinned encoder on the sample conversation:
//! the same packed context as the exact scan, the index file loaded on restart rather than
//! rebuilt, rebuilt when stale, and erasure leaving no erased vector in any index file.
//! Embedded only: a PostgreSQL store keeps no graph file (pgvector serves its dense list).

use std::{os::unix::fs::MetadataExt, path::Path, sync::Arc};

use evicortex::{
    AnnSettings, CatchUpLimits, CompileConfig, CompileError, CompileQuery, CompileRequest,
    CompiledContext, ContextSearch, DenseConfig, DenseIndexRef, EraseTarget, EventTime, HnswParams,
    IngestOptions, Memory, Namespace, SketchParams, TiktokenReader, TokenBudget, TurnId,
    VECTOR_INDEX_DIR, parse_jsonl,
};
use evicortex_vector::{HnswIndex, IndexFileHeader, VectorIndexRead, read_index_header};

const SAMPLE: &str = include_str!("../../../../examples/sample-conversation.jsonl");

pub(crate) fn encoder() -> Arc<dyn evicortex::Encoder> {
    match evicortex_embed::load_pinned_minilm(evicortex_embed::EncoderConfig::all_minilm_l6_v2()) {
        Ok(encoder) => Arc::new(encoder),
        Err(err) => {
            panic!("{err}\nthis test needs the pinned weights: run `evicortex model fetch`")
        }
    }
}

/// Every vector through the graph, whatever the size.
pub(crate) fn graph_always() -> Option<AnnSettings> {
    Some(AnnSettings { threshold: 1, params: HnswParams::default(), ..Default::default() })
}

pub(crate) fn open(
    dir: &Path,
    encoder: &Arc<dyn evicortex::Encoder>,
    ann: Option<AnnSettings>,
) -> Memory {
    Memory::builder(dir).encoder(Arc::clone(encoder)).ann(ann).open().unwrap()
}

fn alice() -> Namespace {
    Namespace::new("alice").unwrap()
}

fn ingest(memory: &Memory, jsonl: &str) {
    let turns = parse_jsonl("sample", jsonl.as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&turns).unwrap();
    memory.catch_up(Some(&alice()), CatchUpLimits::default(), &mut |_| {}).unwrap();
}

fn compile(memory: &Memory, question: &str, as_of: Option<&str>) -> CompiledContext {
    try_compile(memory, question, as_of).unwrap()
}

/// A hybrid compile of `question` over alice's turns at 300 tokens.
pub(crate) fn try_compile(
    memory: &Memory,
    question: &str,
    as_of: Option<&str>,
) -> Result<CompiledContext, CompileError> {
    try_compile_with(
        memory,
        question,
        as_of,
        &CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 }),
    )
}

/// A compile of `question` over alice's turns at 300 tokens under `config`.
fn try_compile_with(
    memory: &Memory,
    question: &str,
    as_of: Option<&str>,
    config: &CompileConfig,
) -> Result<CompiledContext, CompileError> {
    let reader = TiktokenReader::o200k_base();
    let query = CompileQuery {
        namespace: alice(),
        question: question.to_owned(),
        as_of: as_of.map(|t| EventTime::parse_rfc3339(t).unwrap()),
        budget: TokenBudget::new(300),
    };
    let request = CompileRequest { query: &query, config, reader: &reader, query_vectors: &[] };
    memory.compile(&request)
}

fn index_files(store: &Path) -> Vec<std::path::PathBuf> {
    match fs_err::read_dir(store.join(VECTOR_INDEX_DIR)) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn only_index_file(store: &Path) -> (std::path::PathBuf, IndexFileHeader) {
    let files = index_files(store);
    assert_eq!(files.len(), 1, "one namespace, one encoder: {files:?}");
    let header = read_index_header(&files[0]).unwrap();
    (files[0].clone(), header)
}

fn inode(path: &Path) -> u64 {
    fs_err::metadata(path).unwrap().ino()
}

fn items(context: &CompiledContext) -> Vec<serde_json::Value> {
    context
        .items
        .iter()
        .map(|item| {
            let mut value = serde_json::to_value(item).unwrap();
            value.as_object_mut().unwrap().remove("digest");
            value
        })
        .collect()
}

const QUESTIONS: [(&str, Option<&str>); 4] = [
    ("What is my dog's name?", None),
    ("Which city am I moving to?", None),
    ("What did I decide about the apartment?", None),
    ("What do I need for my pet?", Some("2024-03-05T00:00:00Z")),
];

#[test]
fn the_graph_serves_compile_with_the_same_packed_context_as_exact() {
    let encoder = encoder();
    let (graph_dir, exact_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let graph = open(graph_dir.path(), &encoder, graph_always());
    let exact = open(exact_dir.path(), &encoder, None);
    ingest(&graph, SAMPLE);
    ingest(&exact, SAMPLE);
    for (question, as_of) in QUESTIONS {
        let by_graph = compile(&graph, question, as_of);
        let by_exact = compile(&exact, question, as_of);
        assert!(
            matches!(by_graph.dense_index, Some(DenseIndexRef::Hnsw { m: 16, .. })),
            "{:?}",
            by_graph.dense_index
        );
        assert_eq!(by_exact.dense_index, Some(DenseIndexRef::Exact));
        assert!(by_graph.explain().contains("dense index: hnsw (m 16"), "{}", by_graph.explain());
        assert_eq!(by_graph.context_search, None, "the hybrid configuration has no context list");
        assert_eq!(by_graph.text, by_exact.text, "{question}");
        // Record digests are salted per store: everything else about each item is compared.
        assert_eq!(items(&by_graph), items(&by_exact), "{question}");
        assert_eq!(by_graph.excluded, by_exact.excluded, "{question}");
        assert!(!by_graph.items.is_empty(), "{question}");

        // The default configuration's dense context list: behind the graph it is seeded by the
        // graph's beam, which holds every turn of the sample, so every window is scored and the
        // packed context is the exact one.
        let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
        let by_graph = try_compile_with(&graph, question, as_of, &config).unwrap();
        let by_exact = try_compile_with(&exact, question, as_of, &config).unwrap();
        assert_eq!(by_graph.context_search, Some(ContextSearch::Seeded { pool: 256 }));
        assert_eq!(by_exact.context_search, Some(ContextSearch::Exact));
        assert!(by_graph.explain().contains("best 256 turns"), "{}", by_graph.explain());
        assert_eq!(by_graph.text, by_exact.text, "{question}");
        assert_eq!(items(&by_graph), items(&by_exact), "{question}");
    }
    let (_, header) = only_index_file(graph_dir.path());
    let turns = graph.evidence(&alice()).unwrap();
    assert_eq!(header.rows, turns.len(), "one vector per turn of the sample");
    assert_eq!(header.covers, graph.namespace_head(&alice()).unwrap());
    assert!(index_files(exact_dir.path()).is_empty(), "an exact index is never written");
}

/// The sign sketch in the graph's place: on the sample, whose every turn is a candidate, the
/// packed context is the exact one; it is named in the manifest and `explain`, nothing is
/// written, and a namespace under the threshold is scanned.
#[test]
fn the_sketch_serves_compile_with_the_same_packed_context_as_exact() {
    let encoder = encoder();
    let (sketch_dir, exact_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let params = SketchParams { candidates: 40, seeds: 64 };
    let settings = AnnSettings { threshold: 1, sketch: Some(params), ..AnnSettings::default() };
    let sketch = open(sketch_dir.path(), &encoder, Some(settings));
    let exact = open(exact_dir.path(), &encoder, None);
    ingest(&sketch, SAMPLE);
    ingest(&exact, SAMPLE);
    let rows = exact.evidence(&alice()).unwrap().len();
    assert!(rows <= 40, "every turn of the sample is a candidate and a seed");
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    for (question, as_of) in QUESTIONS {
        let by_sketch = try_compile_with(&sketch, question, as_of, &config).unwrap();
        let by_exact = try_compile_with(&exact, question, as_of, &config).unwrap();
        assert_eq!(
            by_sketch.dense_index,
            Some(DenseIndexRef::Sketch { candidates: 40, seeds: 64 }),
            "{question}"
        );
        assert!(by_sketch.explain().contains("sign sketch (candidates 40, seeds 64)"));
        assert_eq!(by_sketch.context_search, Some(ContextSearch::Seeded { pool: 64 }));
        assert_eq!(by_sketch.text, by_exact.text, "{question}");
        assert_eq!(items(&by_sketch), items(&by_exact), "{question}");
    }
    assert!(index_files(sketch_dir.path()).is_empty(), "a sketch writes no index file");
    let above = AnnSettings { threshold: rows + 1, ..settings };
    let under = open(sketch_dir.path(), &encoder, Some(above));
    let context = try_compile_with(&under, QUESTIONS[0].0, None, &config).unwrap();
    assert_eq!(context.dense_index, Some(DenseIndexRef::Exact));
    drop(under);
    // A namespace as large as `sketch_large` asks takes its parameters, and its contexts say so.
    let large = SketchParams { candidates: 40, seeds: 96 };
    let larger = AnnSettings { sketch_large: Some((rows, large)), ..settings };
    let reopened = open(sketch_dir.path(), &encoder, Some(larger));
    let context = try_compile_with(&reopened, QUESTIONS[0].0, None, &config).unwrap();
    assert_eq!(context.dense_index, Some(DenseIndexRef::Sketch { candidates: 40, seeds: 96 }));
    assert_eq!(context.context_search, Some(ContextSearch::Seeded { pool: 96 }));
    assert_eq!(context.text, try_compile_with(&exact, QUESTIONS[0].0, None, &config).unwrap().text);
    drop(reopened);
    let smaller = AnnSettings { sketch_large: Some((rows + 1, large)), ..settings };
    let reopened = open(sketch_dir.path(), &encoder, Some(smaller));
    let context = try_compile_with(&reopened, QUESTIONS[0].0, None, &config).unwrap();
    assert_eq!(context.dense_index, Some(DenseIndexRef::Sketch { candidates: 40, seeds: 64 }));
}

#[test]
fn a_search_whose_filter_admits_fewer_vectors_than_the_threshold_is_served_by_the_exact_scan() {
    let encoder = encoder();
    let (graph_dir, exact_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let exact = open(exact_dir.path(), &encoder, None);
    ingest(&exact, SAMPLE);
    // One vector per turn of the sample: the graph is built at exactly the namespace's size.
    let rows = exact.evidence(&alice()).unwrap().len();
    let settings = AnnSettings { threshold: rows, ..Default::default() };
    let graph = open(graph_dir.path(), &encoder, Some(settings));
    ingest(&graph, SAMPLE);
    let (question, as_of) = QUESTIONS[3];
    let unfiltered = compile(&graph, question, None);
    assert!(matches!(unfiltered.dense_index, Some(DenseIndexRef::Hnsw { .. })));
    assert_eq!(only_index_file(graph_dir.path()).1.rows, rows, "the graph exists");
    // The as-of time admits the first session only: fewer vectors than the threshold.
    let filtered = compile(&graph, question, as_of);
    assert_eq!(filtered.dense_index, Some(DenseIndexRef::Exact), "{}", filtered.explain());
    assert!(filtered.explain().contains("dense index: exact"), "{}", filtered.explain());
    let by_exact = compile(&exact, question, as_of);
    assert_eq!(filtered.text, by_exact.text);
    assert_eq!(items(&filtered), items(&by_exact));
}

#[test]
fn an_embedded_store_searches_by_sketch_from_the_default_threshold_unless_told_otherwise() {
    let encoder = encoder();
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::builder(dir.path()).encoder(Arc::clone(&encoder)).open().unwrap();
    let settings = memory.ann().expect("an embedded store's default");
    assert_eq!(settings, AnnSettings::sketch_from(evicortex::DEFAULT_SKETCH_FROM));
    assert_eq!(settings.sketch, Some(evicortex::SketchParams::default()));
    let more = evicortex::DEFAULT_MORE_SEEDS_FROM;
    let seeds = |rows| settings.sketch_for(rows).map(|p| p.seeds);
    assert_eq!(
        [seeds(evicortex::DEFAULT_SKETCH_FROM - 1), seeds(more - 1), seeds(more)],
        [None, Some(256), Some(512)]
    );
    // Under the threshold, the exact scan serves.
    ingest(&memory, SAMPLE);
    assert_eq!(compile(&memory, QUESTIONS[0].0, None).dense_index, Some(DenseIndexRef::Exact));
    drop(memory);
    assert_eq!(open(dir.path(), &encoder, None).ann(), None, "told: exact whatever the size");
    let graph = AnnSettings::default();
    assert_eq!(open(dir.path(), &encoder, Some(graph)).ann(), Some(graph));
}

#[test]
fn below_the_threshold_the_exact_scan_serves() {
    let encoder = encoder();
    let dir = tempfile::tempdir().unwrap();
    let memory =
        open(dir.path(), &encoder, Some(AnnSettings { threshold: 1000, ..Default::default() }));
    ingest(&memory, SAMPLE);
    assert_eq!(compile(&memory, QUESTIONS[0].0, None).dense_index, Some(DenseIndexRef::Exact));
    assert!(index_files(dir.path()).is_empty());
}

#[test]
fn a_restart_loads_the_file_and_extends_it_rather_than_rebuilding() {
    let encoder = encoder();
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<&str> =
        SAMPLE.lines().filter(|l| l.contains(r#""namespace":"alice""#)).collect();
    let (first, last) = lines.split_at(lines.len() - 1);
    let memory = open(dir.path(), &encoder, graph_always());
    ingest(&memory, &first.join("\n"));
    let before = compile(&memory, QUESTIONS[0].0, None);
    let (path, header) = only_index_file(dir.path());
    let written = inode(&path);
    drop(memory);

    // Every build writes its file (a new inode); a load of a current file writes nothing.
    let memory = open(dir.path(), &encoder, graph_always());
    let again = compile(&memory, QUESTIONS[0].0, None);
    assert_eq!(again.text, before.text);
    assert_eq!(inode(&path), written, "the file was loaded, not rebuilt and rewritten");

    // A turn appended since: the loaded graph is extended with it (an eighth of the rows has
    // not been added, so the file is not rewritten) and the new turn is a dense candidate.
    ingest(&memory, last[0]);
    let extended = compile(&memory, "How much is the rent including the parking spot?", None);
    assert!(matches!(extended.dense_index, Some(DenseIndexRef::Hnsw { .. })));
    let new_turn = memory.namespace_head(&alice()).unwrap().unwrap();
    assert!(
        extended.items.iter().any(|i| i.record == new_turn && i.dense.is_some())
            || extended.excluded.iter().any(|e| e.record == new_turn && e.dense.is_some()),
        "{}",
        extended.explain()
    );
    assert_eq!(extended.coverage.dense, Some(new_turn));
    assert_eq!(inode(&path), written);
    assert_eq!(read_index_header(&path).unwrap().rows, header.rows);
}

#[test]
fn a_stale_or_damaged_file_is_rebuilt() {
    let encoder = encoder();
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), &encoder, graph_always());
    ingest(&memory, SAMPLE);
    let expected = compile(&memory, QUESTIONS[1].0, None);
    drop(memory);
    let (path, _) = only_index_file(dir.path());

    // Other graph parameters: the file is stale, removed and rebuilt under the new ones.
    let other = HnswParams { ef_search: 64, ..HnswParams::default() };
    let memory = open(
        dir.path(),
        &encoder,
        Some(AnnSettings { threshold: 1, params: other, ..Default::default() }),
    );
    let context = compile(&memory, QUESTIONS[1].0, None);
    assert_eq!(context.text, expected.text);
    let (rebuilt, header) = only_index_file(dir.path());
    assert_eq!(rebuilt, path, "same namespace and encoder, same name");
    assert_eq!(header.params, other);
    drop(memory);

    // A damaged file fails its checksum: rebuilt, never served.
    let mut bytes = fs_err::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    fs_err::write(&path, &bytes).unwrap();
    let memory = open(
        dir.path(),
        &encoder,
        Some(AnnSettings { threshold: 1, params: other, ..Default::default() }),
    );
    assert_eq!(compile(&memory, QUESTIONS[1].0, None).text, expected.text);
    // Removed and written again (the inode may be reused, the bytes are not the damaged ones).
    assert_ne!(fs_err::read(&path).unwrap(), bytes, "rewritten");
    HnswIndex::<(TurnId, u32)>::load(&path).unwrap();
}

/// A store holding the sample, served by the graph and compiled once, so that its one index
/// file exists: (its directory, the store, the file).
fn sample_with_graph_file(
    encoder: &Arc<dyn evicortex::Encoder>,
) -> (tempfile::TempDir, Memory, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), encoder, graph_always());
    ingest(&memory, SAMPLE);
    compile(&memory, QUESTIONS[0].0, None);
    let (path, _) = only_index_file(dir.path());
    (dir, memory, path)
}

/// The bytes of a stored unit vector as the file holds them.
fn vector_bytes(path: &Path, turn: TurnId) -> Vec<u8> {
    let (_, index) = HnswIndex::<(TurnId, u32)>::load(path).unwrap();
    let vector = index.exact().get((turn, 0)).expect("the turn is indexed");
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn erasure_leaves_no_erased_vector_in_any_index_file() {
    let encoder = encoder();
    let (dir, memory, path) = sample_with_graph_file(&encoder);
    let victim = memory
        .evidence(&alice())
        .unwrap()
        .into_iter()
        .find(|e| e.turn.text.contains("Biscuit"))
        .expect("the sample names the dog");
    let erased_vector = vector_bytes(&path, victim.id);
    assert!(contains(&fs_err::read(&path).unwrap(), &erased_vector));

    memory.erase(&EraseTarget::Record(alice(), victim.id)).unwrap();
    assert!(index_files(dir.path()).is_empty(), "the erasure removed the namespace's file");
    let after = compile(&memory, QUESTIONS[0].0, None);
    assert!(after.items.iter().all(|i| i.record != victim.id));
    let (path, header) = only_index_file(dir.path());
    assert_eq!(header.rows, memory.evidence(&alice()).unwrap().len());
    let bytes = fs_err::read(&path).unwrap();
    assert!(!contains(&bytes, &erased_vector), "the erased turn's vector is not in the file");
    let (_, index) = HnswIndex::<(TurnId, u32)>::load(&path).unwrap();
    assert!(index.exact().get((victim.id, 0)).is_none());
    assert_eq!(index.len(), header.rows);
}

#[test]
fn a_file_left_by_an_interrupted_erasure_is_removed_on_open() {
    let encoder = encoder();
    let (dir, memory, path) = sample_with_graph_file(&encoder);
    let saved = fs_err::read(&path).unwrap();
    let victim = memory.evidence(&alice()).unwrap()[0].id;
    memory.erase(&EraseTarget::Record(alice(), victim)).unwrap();
    drop(memory);
    // As if the process died between the ledger's erasure and the purge.
    fs_err::write(&path, &saved).unwrap();
    let _memory = open(dir.path(), &encoder, graph_always());
    assert!(index_files(dir.path()).is_empty(), "removed on open, before any compile");
}

/// A writer killed before the rename leaves its temporary file (found by the SIGKILL test in
/// `crates/cli/tests/it/crash_points`): a copy of the vectors that no erasure's purge matched
/// by name. The next open removes it; a temporary file whose writer still holds its lock stays.
#[test]
fn a_temporary_file_of_a_killed_writer_is_removed_on_open() {
    let encoder = encoder();
    let (dir, memory, path) = sample_with_graph_file(&encoder);
    drop(memory);
    let index_dir = dir.path().join(VECTOR_INDEX_DIR);
    let abandoned = index_dir.join(".hnsw-killed1.tmp");
    fs_err::copy(&path, &abandoned).unwrap();
    let live = index_dir.join(".hnsw-writing.tmp");
    fs_err::copy(&path, &live).unwrap();
    let writer = fs_err::File::open(&live).unwrap();
    writer.file().lock().unwrap();

    let _memory = open(dir.path(), &encoder, graph_always());
    let mut left = index_files(dir.path());
    left.sort();
    assert_eq!(left, [live.clone(), path], "the abandoned file is removed, the live one kept");
    drop(writer);
    drop(_memory);
    let _memory = open(dir.path(), &encoder, graph_always());
    assert!(!live.exists(), "once its writer is gone, it is removed too");
}
