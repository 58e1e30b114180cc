//! The runner: loads a benchmark, selects the split, runs every system on every question at
//! every budget, scores what each system packed, and assembles the report.

mod system_pass;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use anyhow::{Context, bail};
use evicortex::{EmbedReport, Encoder, EncoderConfig, Overlength, ReaderTokenizer};
use serde::Serialize;

use crate::{
    datasets::{
        locomo::LocomoDataset,
        longmemeval::{AS_OF_POLICY, LongMemEvalDataset},
    },
    eval_question::EvalQuestion,
    eval_store::{EvalStore, IngestSummary},
    protocol::Exclusion,
    report::{QuestionCounts, Report},
    split::{SplitFile, SplitName},
    systems::{
        Bm25OfficialSystem, EvalSystem, FullHistorySystem, KNOWN_SYSTEMS, NoMemorySystem,
        OracleSystem, SharedSettings,
    },
    variants::SystemVariant,
};

use self::system_pass::run_system;

/// Which benchmark a run reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Benchmark {
    /// LongMemEval (`.json` / `.json.gz`).
    LongMemEval,
    /// LoCoMo.
    Locomo,
}

/// Every setting of a run; recorded verbatim in the report.
#[derive(Clone, Debug, Serialize)]
pub struct RunSpec {
    /// The benchmark.
    pub benchmark: Benchmark,
    /// The dataset file.
    pub dataset: PathBuf,
    /// The split used.
    pub split: SplitName,
    /// The split file (required for dev/test on LongMemEval).
    pub split_file: Option<PathBuf>,
    /// System names, in report order.
    pub systems: Vec<String>,
    /// Budgets in reader tokens (`None` = no budget); the first is the primary budget.
    pub budgets: Vec<Option<usize>>,
    /// Reader tokenizer name.
    pub reader_tokenizer: String,
    /// Cutoffs k of the metrics.
    pub cutoffs: Vec<usize>,
    /// Most candidates any retriever offers the packer.
    pub candidate_limit: usize,
    /// Run only the first N selected questions (CI subsets); `None` runs all.
    pub max_questions: Option<usize>,
    /// Run only the first N selected questions of each question type (LongMemEval) or category
    /// (LoCoMo), in file order: a stratified subset; `None` runs all.
    pub max_per_type: Option<usize>,
    /// Support thresholds of the compiled systems by support signal (abstain below it), for
    /// systems whose own configuration sets none (a variant's threshold wins); a signal without
    /// one never abstains.
    pub abstention_thresholds: BTreeMap<String, f32>,
    /// Named variants of the compiled systems (see [`crate::variants`]), usable in `systems`.
    pub variants: BTreeMap<String, SystemVariant>,
    /// The catalogue encoder of dense retrieval and the comparator.
    pub encoder: String,
    /// Further catalogue encoders fused by the compiled systems beside `encoder`.
    pub also_encoders: Vec<String>,
    /// The reranker of the systems that rerank ([`evicortex::RerankerSpec`]), if any.
    pub reranker: Option<String>,
    /// The committed configuration file this run came from, and its SHA-256 (preregistration).
    pub config_file: Option<(PathBuf, String)>,
    /// A stratified subset: N questions taken round-robin over the question types (LongMemEval)
    /// or categories (LoCoMo), each in file order; deterministic. Applied after
    /// `max_per_type`, before `max_questions`.
    pub stratified: Option<usize>,
    /// The reader stage (`--reader`): every system's packed context is read and the answers
    /// scored. Budgets are then counted in the reader's own tokenizer.
    pub reader: Option<crate::reader_stage::ReaderStageSpec>,
}

impl RunSpec {
    /// A run of `benchmark` on the whole of `dataset` with the settings `evicortex eval` takes
    /// without a configuration file: `bm25-official` without a budget, counted in `o200k_base`,
    /// cutoffs 1, 3, 5 and 10, 50 candidates, the default encoder alone; no subset, variant,
    /// threshold, reranker or reader.
    pub fn new(benchmark: Benchmark, dataset: PathBuf) -> RunSpec {
        RunSpec {
            benchmark,
            dataset,
            split: SplitName::All,
            split_file: None,
            systems: vec!["bm25-official".into()],
            budgets: vec![None],
            reader_tokenizer: "o200k_base".into(),
            cutoffs: vec![1, 3, 5, 10],
            candidate_limit: 50,
            max_questions: None,
            max_per_type: None,
            abstention_thresholds: BTreeMap::new(),
            variants: BTreeMap::new(),
            encoder: evicortex::DEFAULT_MODEL.to_owned(),
            also_encoders: Vec::new(),
            reranker: None,
            config_file: None,
            stratified: None,
            reader: None,
        }
    }
}

/// Builds the systems that need neither encoder nor compiler; others come from `extra`.
pub type SystemFactory<'a> =
    &'a mut dyn FnMut(&str, &SharedSettings) -> anyhow::Result<Option<Box<dyn EvalSystem>>>;

/// Loads the benchmark and turns it into questions (the split applied), with the adapter stats.
pub fn load_questions(
    spec: &RunSpec,
) -> anyhow::Result<(
    crate::ArtifactIdentity,
    serde_json::Value,
    Vec<EvalQuestion>,
    QuestionCounts,
    String,
)> {
    let mut counts = QuestionCounts::default();
    match spec.benchmark {
        Benchmark::LongMemEval => {
            let split = match (spec.split, &spec.split_file) {
                (SplitName::All, None) => SplitFile::default(),
                (_, Some(path)) => SplitFile::read(path)?,
                (s, None) => bail!("--split {s:?} needs --split-file"),
            };
            let ds = LongMemEvalDataset::read(&spec.dataset, &|id| split.selects(spec.split, id))
                .with_context(|| format!("reading {}", spec.dataset.display()))?;
            let present: std::collections::HashSet<&str> =
                ds.questions.iter().map(|q| q.id()).collect();
            counts.split_questions_missing_from_dataset = split
                .assignment
                .iter()
                .filter(|(id, s)| {
                    (spec.split == SplitName::All || **s == spec.split)
                        && !present.contains(id.as_str())
                })
                .map(|(id, _)| id.clone())
                .collect();
            let questions = ds.questions.iter().map(EvalQuestion::from_longmemeval).collect();
            Ok((
                ds.artifact,
                serde_json::to_value(&ds.stats)?,
                questions,
                counts,
                AS_OF_POLICY.to_owned(),
            ))
        }
        Benchmark::Locomo => {
            if spec.split != SplitName::All {
                bail!(
                    "LoCoMo files are already split (the dev file is the development part): use --split all"
                );
            }
            let ds = LocomoDataset::read(&spec.dataset)
                .with_context(|| format!("reading {}", spec.dataset.display()))?;
            let questions = ds.conversations.iter().flat_map(EvalQuestion::from_locomo).collect();
            Ok((
                ds.artifact,
                serde_json::to_value(&ds.stats)?,
                questions,
                counts,
                "no as-of limit: LoCoMo questions follow the whole conversation".to_owned(),
            ))
        }
    }
}

/// Runs `spec` over `store` (which systems that pack into a budget need: every context cites the
/// store's records). `factory` builds systems beyond the built-in controls (compiler- and
/// encoder-backed ones); it returns `None` for names it does not know.
pub fn run(
    spec: &RunSpec,
    store: Option<Arc<EvalStore>>,
    factory: SystemFactory<'_>,
) -> anyhow::Result<Report> {
    let load_start = Instant::now();
    let stage = match &spec.reader {
        Some(stage) => Some(crate::reader_stage::ReaderStage::load(stage, spec.benchmark)?),
        None => None,
    };
    let reader: Arc<dyn ReaderTokenizer> = match stage.as_ref().and_then(|s| s.reader().tokenizer())
    {
        Some(own) => own,
        None => evicortex::reader_tokenizer(&spec.reader_tokenizer)
            .with_context(|| format!("reader tokenizer {}", spec.reader_tokenizer))?
            .into(),
    };
    let settings = SharedSettings {
        reader,
        candidate_limit: spec.candidate_limit,
        store,
        layout: evicortex::CompileConfig::default_for(true).layout,
    };
    let (artifact, adapter, mut questions, mut counts, as_of_policy) = load_questions(spec)?;
    subset(&mut questions, spec);
    counts.selected = questions.len();
    for q in &questions {
        match q.keys.exclusion {
            None => counts.scored += 1,
            Some(Exclusion::Abstention) => counts.abstention += 1,
            Some(Exclusion::NoUserEvidence) => counts.no_evidence += 1,
        }
    }
    let mut wall_time_s = BTreeMap::new();
    wall_time_s.insert("load".to_owned(), load_start.elapsed().as_secs_f64());
    let mut systems: Vec<Box<dyn EvalSystem>> = Vec::new();
    for name in &spec.systems {
        systems.push(build_system(name, &settings, &spec.variants, factory)?);
    }
    let mut reports = BTreeMap::new();
    let mut answers = BTreeMap::new();
    let mut outcomes = Vec::new();
    for system in &mut systems {
        let start = Instant::now();
        let name = system.name().to_owned();
        let pass = run_system(&mut **system, &questions, spec, stage.as_ref())?;
        reports.insert(name.clone(), pass.report);
        if let Some(by_budget) = pass.answers {
            answers.insert(name.clone(), by_budget);
        }
        outcomes.extend(pass.outcomes);
        wall_time_s.insert(format!("system {name}"), start.elapsed().as_secs_f64());
    }
    let notes =
        report_notes(&as_of_policy, &*settings.reader, stage.as_ref(), &artifact, spec.split);
    Ok(Report {
        benchmark: match spec.benchmark {
            Benchmark::LongMemEval => "longmemeval".into(),
            Benchmark::Locomo => "locomo".into(),
        },
        dataset: artifact,
        adapter,
        as_of_policy,
        config: serde_json::to_value(spec)?,
        encoder: None,
        questions: counts,
        systems: reports,
        wall_time_s,
        notes,
        reader: stage.as_ref().map(|s| s.describe()),
        answers,
        outcomes,
    })
}

/// How to read the report's numbers: the as-of policy, what is credited and how budgets are
/// counted, the reader stage's own notes, and warnings about the dataset and the split.
fn report_notes(
    as_of_policy: &str,
    reader: &dyn ReaderTokenizer,
    stage: Option<&crate::reader_stage::ReaderStage>,
    artifact: &crate::ArtifactIdentity,
    split: SplitName,
) -> Vec<String> {
    let mut notes = vec![
        format!("as-of policy: {as_of_policy}"),
        "metrics are computed after packing: a system is credited only for evidence inside its packed context, in its own rank order".to_owned(),
        "session metrics of turn-level systems come from the released turn-to-session widening; bm25-official without a budget ranks sessions directly, as the release does".to_owned(),
        format!("budgets are counted exactly in the {} reader tokenizer, headers and citations included", reader.name()),
        "every system's context is rendered in the product's layout (preamble, session headers, one cited line per turn or part of a turn) and counted by the same exact count; compiled systems run the product's compile path (Memory::compile)".to_owned(),
    ];
    if let Some(stage) = stage {
        notes.extend(stage.notes());
    }
    if !artifact.official {
        notes.push(format!(
            "the dataset is NOT an official artifact ({}; sha256 {})",
            artifact.name, artifact.sha256
        ));
    }
    if split == SplitName::Dev {
        notes.push("dev split: for tuning and calibration only; not a reported result".to_owned());
    }
    if split == SplitName::Test {
        notes.push("test split: run once with the frozen, committed configuration".to_owned());
    }
    notes
}

fn build_system(
    name: &str,
    settings: &SharedSettings,
    variants: &BTreeMap<String, SystemVariant>,
    factory: SystemFactory<'_>,
) -> anyhow::Result<Box<dyn EvalSystem>> {
    Ok(match name {
        "bm25-official" => Box::new(Bm25OfficialSystem::new(settings.clone())),
        "no-memory" => Box::new(NoMemorySystem),
        "full-history" => Box::new(FullHistorySystem::new(settings.clone())),
        "oracle" => Box::new(OracleSystem::new(settings.clone())),
        other => match factory(other, settings)? {
            Some(system) => system,
            None if KNOWN_SYSTEMS.contains(&other) || variants.contains_key(other) => {
                bail!(
                    "system {other} needs the compiler and encoder, which this build's factory does not provide"
                )
            }
            None => bail!("unknown system {other:?}; known: {}", KNOWN_SYSTEMS.join(", ")),
        },
    })
}

/// A progress bar for a long step, shown on a terminal and hidden when stderr is piped.
fn progress_bar(len: u64, name: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix:>16} [{bar:30}] {pos}/{len} {elapsed} eta {eta}",
        )
        .expect("static template is valid")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    bar
}

/// SHA-256 of a configuration file, for the preregistration record.
pub fn config_digest(path: &Path) -> anyhow::Result<String> {
    let bytes = fs_err::read(path)?;
    use sha2::Digest;
    Ok(crate::artifact::hex(&sha2::Sha256::digest(&bytes)))
}

/// The default encoder's configuration: the pinned all-MiniLM-L6-v2 with its 256-token limit;
/// longer turns are embedded as windows of 256 tokens overlapping by 64 (each window its own
/// vector; a turn scores as its best window). Other catalogue encoders window the same way.
pub fn eval_encoder_config() -> EncoderConfig {
    evicortex::pinned_encoder_config(eval_overlength())
}

/// The overlength policy of [`eval_encoder_config`] (`evicortex compile --overlength window:64`).
pub fn eval_overlength() -> Overlength {
    Overlength::Window { overlap_tokens: 64 }
}

/// Loads the default encoder ([`eval_encoder_config`]).
pub fn eval_encoder() -> anyhow::Result<Arc<dyn Encoder>> {
    evicortex::load_pinned_encoder(eval_overlength()).context("loading the pinned encoder")
}

/// Loads the run's encoders (`spec.encoder`, then `spec.also_encoders`, windowed as
/// [`eval_encoder_config`] says).
pub fn run_encoders(spec: &RunSpec) -> anyhow::Result<Vec<Arc<dyn Encoder>>> {
    std::iter::once(&spec.encoder)
        .chain(&spec.also_encoders)
        .map(|name| {
            evicortex::load_catalogue_encoder(name, eval_overlength())
                .with_context(|| format!("loading the encoder {name}"))
        })
        .collect()
}

/// Loads the run's reranker when a system reranks; refuses such a run without one.
pub fn eval_reranker(spec: &RunSpec) -> anyhow::Result<Option<evicortex::LoadedReranker>> {
    let mut reranking = None;
    for system in &spec.systems {
        if let Some(c) = crate::variants::resolve(&spec.variants, system, spec.candidate_limit)?
            && c.rerank != evicortex::RerankConfig::Off
        {
            reranking = Some(system);
            break;
        }
    }
    let Some(system) = reranking else { return Ok(None) };
    let Some(raw) = &spec.reranker else {
        bail!(
            "system {system} reranks and the run names no reranker: set `reranker` in the \
             configuration (mpnet-cosine, cosine:MODEL or cross-encoder:DIR@SHA256)"
        );
    };
    let reranker_spec: evicortex::RerankerSpec = raw.parse()?;
    Ok(Some(
        evicortex::load_reranker(&reranker_spec)
            .with_context(|| format!("loading the reranker {reranker_spec}"))?,
    ))
}

/// Opens the store in `dir` (with `encoders` when given, the leading one first), ingests the
/// selected questions and, with encoders, embeds every pending text (resumably).
pub fn prepare_store(
    spec: &RunSpec,
    dir: &Path,
    encoders: Vec<Arc<dyn Encoder>>,
    reranker: Option<evicortex::LoadedReranker>,
) -> anyhow::Result<(EvalStore, IngestSummary, Option<EmbedReport>)> {
    let (_, _, mut questions, _, _) = load_questions(spec)?;
    subset(&mut questions, spec);
    let store = EvalStore::open(dir, encoders, reranker)?;
    let ingest = store.ingest(&questions)?;
    eprintln!(
        "ingest: {} namespaces appended ({} turns), {} already present, {:.1} s",
        ingest.namespaces_appended,
        ingest.turns_appended,
        ingest.namespaces_present,
        ingest.seconds
    );
    if !store.memory.has_encoder() {
        return Ok((store, ingest, None));
    }
    let bar = progress_bar(0, "embed");
    let mut last_print = Instant::now();
    let report = store.embed(&mut |p| {
        bar.set_length(p.total_tokens);
        bar.set_position(p.done_tokens);
        if last_print.elapsed().as_secs() >= 60 {
            last_print = Instant::now();
            eprintln!(
                "embed: {}/{} texts, {}/{} tokens",
                p.done_texts, p.total_texts, p.done_tokens, p.total_tokens
            );
        }
    })?;
    bar.finish_and_clear();
    for one in std::iter::once(&report).chain(&report.also) {
        eprintln!(
            "embed {}: {} texts embedded ({} tokens, {} vectors), {} already cached, {} refused, \
             {:.1} s",
            one.model,
            one.embedded_texts,
            one.embedded_tokens,
            one.vectors_written,
            one.already_cached,
            one.refused.len(),
            one.seconds
        );
    }
    Ok((store, ingest, Some(report)))
}

/// Whether `system` cites the store's records: compiled systems and the comparator always,
/// controls that pack whenever the run has a budget.
pub fn needs_store(spec: &RunSpec, system: &str) -> anyhow::Result<bool> {
    let packs = spec.budgets.iter().any(Option::is_some);
    Ok(match system {
        "comparator" => true,
        "no-memory" => false,
        "bm25-official" | "full-history" | "oracle" => packs,
        _ => crate::variants::resolve(&spec.variants, system, spec.candidate_limit)?.is_some(),
    })
}

/// Whether `system` needs the encoder.
pub fn needs_encoder(spec: &RunSpec, system: &str) -> anyhow::Result<bool> {
    Ok(system == "comparator"
        || crate::variants::resolve(&spec.variants, system, spec.candidate_limit)?
            .is_some_and(|c| matches!(c.dense, evicortex::DenseConfig::On { .. })))
}

fn any_system(
    spec: &RunSpec,
    test: fn(&RunSpec, &str) -> anyhow::Result<bool>,
) -> anyhow::Result<bool> {
    for s in &spec.systems {
        if test(spec, s)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Runs `spec` with every system: controls in memory, compiled systems and the comparator on the
/// store in `store_dir` (ingested and embedded first, resumably).
pub fn run_all(spec: &RunSpec, store_dir: &Path) -> anyhow::Result<Report> {
    let encoders = if any_system(spec, needs_encoder)? { run_encoders(spec)? } else { Vec::new() };
    let reranker = eval_reranker(spec)?;
    let reranker_name = reranker.as_ref().map(|r| r.reranker.name().to_owned());
    let mut prepare_s = None;
    let store = if any_system(spec, needs_store)? {
        let start = Instant::now();
        let (store, _, _) = prepare_store(spec, store_dir, encoders.clone(), reranker)?;
        prepare_s = Some(start.elapsed().as_secs_f64());
        Some(Arc::new(store))
    } else {
        None
    };
    let mut factory = |name: &str,
                       settings: &SharedSettings|
     -> anyhow::Result<Option<Box<dyn EvalSystem>>> {
        let Some(store) = &settings.store else { return Ok(None) };
        if name == "comparator" {
            return Ok(Some(Box::new(crate::comparator::hybrid_chunk_rag::HybridChunkRag::new(
                crate::comparator::hybrid_chunk_rag::ChunkRagConfig::preregistered(
                    settings.candidate_limit,
                ),
                store.clone(),
                settings.clone(),
            )?)));
        }
        let Some(config) =
            crate::variants::resolve(&spec.variants, name, settings.candidate_limit)?
        else {
            return Ok(None);
        };
        let config = crate::variants::with_file_threshold(config, &spec.abstention_thresholds)?;
        Ok(Some(Box::new(crate::compiled_systems::CompiledSystem::new(
            name,
            config,
            store.clone(),
            settings.reader.clone(),
        )?)))
    };
    let mut report = run(spec, store, &mut factory)?;
    if let Some(s) = prepare_s {
        report.wall_time_s.insert("ingest and embed".to_owned(), s);
    }
    if let Some((e, also)) = encoders.split_first() {
        let also: Vec<serde_json::Value> = also
            .iter()
            .map(|a| serde_json::json!({"model": a.identity().model, "identity_digest": a.identity_digest().to_hex()}))
            .collect();
        report.encoder = Some(serde_json::json!({
            "identity": serde_json::from_str::<serde_json::Value>(&e.identity().canonical_json())?,
            "identity_digest": e.identity_digest().to_hex(),
            "also_encoders": also,
            "reranker": reranker_name,
        }));
    }
    Ok(report)
}

/// Applies `max_per_type`, then `stratified`, then `max_questions`.
pub fn subset(questions: &mut Vec<EvalQuestion>, spec: &RunSpec) {
    subset_per_type(questions, spec);
    if let Some(n) = spec.stratified {
        *questions = stratified(std::mem::take(questions), n);
    }
    if let Some(n) = spec.max_questions {
        questions.truncate(n);
    }
}

/// `n` questions taken round-robin over the kinds (sorted by name), each kind in file order,
/// returned in file order.
pub fn stratified(questions: Vec<EvalQuestion>, n: usize) -> Vec<EvalQuestion> {
    let mut by_kind: BTreeMap<&str, std::collections::VecDeque<usize>> = BTreeMap::new();
    for (i, q) in questions.iter().enumerate() {
        by_kind.entry(q.kind.as_str()).or_default().push_back(i);
    }
    let mut chosen = Vec::with_capacity(n);
    while chosen.len() < n && by_kind.values().any(|v| !v.is_empty()) {
        for queue in by_kind.values_mut() {
            if chosen.len() == n {
                break;
            }
            if let Some(i) = queue.pop_front() {
                chosen.push(i);
            }
        }
    }
    chosen.sort_unstable();
    let keep: std::collections::HashSet<usize> = chosen.into_iter().collect();
    questions.into_iter().enumerate().filter(|(i, _)| keep.contains(i)).map(|(_, q)| q).collect()
}

fn subset_per_type(questions: &mut Vec<EvalQuestion>, spec: &RunSpec) {
    if let Some(n) = spec.max_per_type {
        let mut taken: BTreeMap<String, usize> = BTreeMap::new();
        questions.retain(|q| {
            let c = taken.entry(q.kind.clone()).or_insert(0);
            *c += 1;
            *c <= n
        });
    }
}
