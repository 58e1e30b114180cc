//! `evicortex eval longmemeval|locomo`: run the evaluation harness and write `report.json`,
//! `report.md` and `questions.jsonl`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use evicortex_eval::{
    data_dir,
    packed_outcomes::{packed_from_outcomes, packed_markdown},
    pooled_calibration::{pool, pooled_markdown, read_support_points},
    reader_stage::{JudgeSetting, ReaderStageSpec},
    run_config::{RunConfigFile, check_abstention_threshold, parse_budget},
    runner::{Benchmark, RunSpec},
    split::SplitName,
};

use std::io::Write as _;

use crate::exit::UsageError;

/// Arguments of `evicortex eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The benchmark.
    #[command(subcommand)]
    pub benchmark: EvalBenchmark,
}

/// Which benchmark to run.
#[derive(Debug, Subcommand)]
pub enum EvalBenchmark {
    /// LongMemEval (.json or .json.gz); metrics reproduce the released retrieval evaluation.
    Longmemeval(EvalRunArgs),
    /// LoCoMo (.json); evidence by dialogue id, results by category.
    Locomo(EvalRunArgs),
    /// Prints, from a run's questions.jsonl, the share of scored questions whose gold evidence is
    /// anywhere in the packed context (for reports that predate the measure).
    Packed(PackedArgs),
    /// Fits one abstention threshold over several runs' questions.jsonl (abstention cases and
    /// answerable questions of one system pooled), with its 95% bootstrap interval, and prints
    /// what it and any `--threshold` catch and refuse in each run.
    Calibrate(CalibrateArgs),
    /// Carries a reader run's answer cache between machines: `export` writes it as JSON lines
    /// (commit them), `import` adds such a file to a cache, so the next run reads only what is
    /// missing.
    Answers(AnswersArgs),
}

/// Arguments of `evicortex eval answers`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  evicortex eval answers export --cache STORE/answers.sqlite --file answers.jsonl\n  evicortex eval answers import --cache STORE/answers.sqlite --file answers.jsonl"
)]
pub struct AnswersArgs {
    /// `export` (cache to file) or `import` (file into cache).
    #[arg(value_parser = ["export", "import"])]
    pub direction: String,
    /// The answer cache (the run's `--answer-cache`; default answers.sqlite in the store's
    /// directory, or a PostgreSQL store's derived directory).
    #[arg(long, value_name = "FILE")]
    pub cache: Option<PathBuf>,
    /// The JSON-lines file.
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
}

/// Arguments of `evicortex eval calibrate`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  evicortex eval calibrate --outcomes runs/locomo-dev/questions.jsonl \\\n    --outcomes runs/longmemeval-s-dev/questions.jsonl --system evicortex --threshold 0.35"
)]
pub struct CalibrateArgs {
    /// A run's per-question outcomes (questions.jsonl); give it once per run.
    #[arg(long, value_name = "FILE", required = true)]
    pub outcomes: Vec<PathBuf>,
    /// The system whose support scores are calibrated.
    #[arg(long, default_value = "evicortex")]
    pub system: String,
    /// The budget whose lines are read (default: the smallest in each file).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Further thresholds to show the effect of (abstain strictly below).
    #[arg(long)]
    pub threshold: Vec<f32>,
}

/// Arguments of `evicortex eval packed`.
#[derive(Debug, Args)]
pub struct PackedArgs {
    /// A run's per-question outcomes (questions.jsonl).
    #[arg(long, value_name = "FILE")]
    pub outcomes: PathBuf,
}

/// One evaluation run. With `--config`, the committed file fixes every setting and flags given
/// override single settings (recorded in the report).
#[derive(Debug, Args)]
pub struct EvalRunArgs {
    /// A committed configuration (eval/configs/*.json); its digest goes into the report.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The dataset file.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// dev (tuning and calibration), test (reported once) or all.
    #[arg(long)]
    pub split: Option<String>,
    /// The split file (split.tsv).
    #[arg(long, value_name = "FILE")]
    pub split_file: Option<PathBuf>,
    /// Systems, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub systems: Option<Vec<String>>,
    /// Budgets in reader tokens, comma-separated; `none` for no budget. The first is primary.
    #[arg(long, value_delimiter = ',')]
    pub budget_tokens: Option<Vec<String>>,
    /// The reader tokenizer: o200k_base, cl100k_base or a tokenizer.json path.
    #[arg(long)]
    pub reader_tokenizer: Option<String>,
    /// Metric cutoffs, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub cutoffs: Option<Vec<usize>>,
    /// Most candidates any retriever offers the packer.
    #[arg(long)]
    pub candidate_limit: Option<usize>,
    /// Run only the first N selected questions (small CI subsets).
    #[arg(long)]
    pub max_questions: Option<usize>,
    /// Run only the first N selected questions of each question type (stratified subset).
    #[arg(long)]
    pub max_per_type: Option<usize>,
    /// Support threshold below which compiled systems using SIGNAL abstain, as SIGNAL=VALUE
    /// (max_dense_cosine or lexical_coverage; frozen from a dev run's calibration); repeatable,
    /// overrides the configuration file's entry for that signal.
    #[arg(long, value_name = "SIGNAL=VALUE")]
    pub abstention_threshold: Vec<String>,
    /// The catalogue encoder of dense retrieval and the comparator (`evicortex model list`).
    #[arg(long, value_name = "NAME")]
    pub encoder: Option<String>,
    /// A further catalogue encoder whose dense list the compiled systems fuse beside
    /// `--encoder`'s (repeatable; the comparator keeps `--encoder`).
    #[arg(long, value_name = "NAME")]
    pub also_encoder: Vec<String>,
    /// The reranker of the systems that rerank: mpnet-cosine, cosine:MODEL or
    /// cross-encoder:DIR@SHA256.
    #[arg(long, value_name = "SPEC")]
    pub reranker: Option<String>,
    /// Run N questions taken round-robin over the question types or categories, each in file
    /// order (a deterministic stratified subset).
    #[arg(long, value_name = "N")]
    pub stratified: Option<usize>,
    /// Read every system's packed context with this reader and score the answers: a local
    /// reader's name (`evicortex model list`; budgets are then counted in its own tokenizer) or
    /// `endpoint` (the chat-completions API the EVICORTEX_READER_* variables name; budgets in
    /// --reader-tokenizer).
    #[arg(long, value_name = "NAME")]
    pub reader: Option<String>,
    /// Who judges LongMemEval answers: `reader` (default), `none` (containment only),
    /// `endpoint`, or a local reader's name.
    #[arg(long, value_name = "JUDGE", requires = "reader")]
    pub judge: Option<String>,
    /// Most tokens the reader generates per answer.
    #[arg(long, default_value_t = 48, value_name = "N")]
    pub max_new_tokens: u32,
    /// The answer cache (answers by reader identity, prompt digest and decoding: reruns
    /// resume). Default: answers.sqlite in the store directory (a PostgreSQL store's derived
    /// directory).
    #[arg(long, value_name = "FILE", requires = "reader")]
    pub answer_cache: Option<PathBuf>,
    /// Only ingest the selected questions into the store and embed them (resumable), then stop.
    #[arg(long)]
    pub embed_only: bool,
    /// Output directory for report.json, report.md and questions.jsonl (per-question outcomes).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

fn carry_answers(store: &Path, args: &AnswersArgs) -> anyhow::Result<()> {
    let cache = match &args.cache {
        Some(cache) => cache.clone(),
        None => default_answer_cache(store)?,
    };
    let (verb, n) = match args.direction.as_str() {
        "export" => ("exported", evicortex_eval::reader_stage::export_answers(&cache, &args.file)?),
        _ => ("imported", evicortex_eval::reader_stage::import_answers(&cache, &args.file)?),
    };
    writeln!(
        crate::stdout::stdout(),
        "{verb} {n} answers ({} <-> {})",
        cache.display(),
        args.file.display()
    )?;
    Ok(())
}

/// answers.sqlite where the store keeps its local files: the store directory, or a PostgreSQL
/// store's derived directory (a URL is no directory to write into).
fn default_answer_cache(store: &Path) -> anyhow::Result<PathBuf> {
    Ok(evicortex::store_files_dir(store)?.join("answers.sqlite"))
}

/// Runs `evicortex eval`.
pub fn run_eval(store: &Path, args: &EvalArgs) -> anyhow::Result<()> {
    let (benchmark, run_args) = match &args.benchmark {
        EvalBenchmark::Longmemeval(a) => (Benchmark::LongMemEval, a),
        EvalBenchmark::Locomo(a) => (Benchmark::Locomo, a),
        EvalBenchmark::Packed(a) => return print_packed(&a.outcomes),
        EvalBenchmark::Calibrate(a) => return print_calibration(a),
        EvalBenchmark::Answers(a) => return carry_answers(store, a),
    };
    let mut spec = spec_from_args(benchmark, run_args)?;
    if let Some(reader) = &run_args.reader {
        let judge = match run_args.judge.as_deref() {
            None | Some("reader") => JudgeSetting::Reader,
            Some("none") => JudgeSetting::None,
            Some("endpoint") => JudgeSetting::Endpoint,
            Some(name) => JudgeSetting::Local(name.to_owned()),
        };
        if reader == "endpoint" && run_args.reader_tokenizer.is_none() {
            bail!(UsageError(
                "--reader endpoint needs --reader-tokenizer (the endpoint model's tokenizer)"
                    .into()
            ));
        }
        spec.reader = Some(ReaderStageSpec {
            reader: reader.clone(),
            judge,
            max_new_tokens: run_args.max_new_tokens,
            cache: match &run_args.answer_cache {
                Some(cache) => cache.clone(),
                None => default_answer_cache(store)?,
            },
        });
    }
    if run_args.embed_only {
        let encoders = evicortex_eval::runner::run_encoders(&spec)?;
        evicortex_eval::runner::prepare_store(&spec, store, encoders, None)?;
        return Ok(());
    }
    let report = evicortex_eval::runner::run_all(&spec, store)?;
    report
        .write(&run_args.out, &spec.cutoffs)
        .with_context(|| format!("writing the report into {}", run_args.out.display()))?;
    for (name, sys) in &report.systems {
        let s = &sys.overall.session;
        let t = &sys.overall.turn;
        let k = spec.cutoffs.iter().max().copied().unwrap_or(10);
        eprintln!(
            "{name:>16}: n={} session recall_all@{k} {:.4} ndcg_any@{k} {:.4}, turn recall_all@{k} {:.4}",
            sys.n_scored,
            s.get(&format!("recall_all@{k}")).copied().unwrap_or(f64::NAN),
            s.get(&format!("ndcg_any@{k}")).copied().unwrap_or(f64::NAN),
            t.get(&format!("recall_all@{k}")).copied().unwrap_or(f64::NAN),
        );
    }
    for (name, budgets) in &report.answers {
        for (budget, summary) in budgets {
            let o = &summary.overall;
            let fmt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.4}"));
            eprintln!(
                "{name:>16} @{budget}: answers n={} F1 {} judge {} containment {:.4} abstained \
                 {:.4}, {:.0} prompt tokens, {:.1} generated, {:.2} s/question",
                o.n,
                fmt(o.f1),
                fmt(o.judge_accuracy),
                o.containment,
                o.abstained,
                o.prompt_tokens,
                o.generated_tokens,
                o.seconds
            );
        }
    }
    eprintln!("wrote {}", run_args.out.join("report.json").display());
    Ok(())
}

fn print_calibration(a: &CalibrateArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for path in &a.outcomes {
        let file = fs_err::File::open(path)?;
        runs.push(read_support_points(
            &path.display().to_string(),
            std::io::BufReader::new(file),
            &a.system,
            a.budget,
        )?);
    }
    let pooled = pool(&runs);
    write!(crate::stdout::stdout(), "{}", pooled_markdown(&runs, &pooled, &a.threshold))?;
    Ok(())
}

fn print_packed(outcomes: &Path) -> anyhow::Result<()> {
    let file = fs_err::File::open(outcomes)?;
    let table = packed_from_outcomes(std::io::BufReader::new(file))
        .with_context(|| format!("reading {}", outcomes.display()))?;
    write!(crate::stdout::stdout(), "{}", packed_markdown(&table))?;
    Ok(())
}

fn spec_from_args(benchmark: Benchmark, a: &EvalRunArgs) -> anyhow::Result<RunSpec> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    let mut spec = match &a.config {
        Some(path) => {
            let file = RunConfigFile::read(path)?;
            let spec = file.to_spec(&data_dir(Path::new(".")), path)?;
            if spec.benchmark != benchmark {
                return Err(usage(format!(
                    "{} is a {} configuration",
                    path.display(),
                    file.benchmark
                )));
            }
            spec
        }
        None => {
            let Some(dataset) = a.dataset.clone() else {
                return Err(usage("--dataset is required without --config".into()));
            };
            RunSpec::new(benchmark, dataset)
        }
    };
    if let Some(d) = &a.dataset {
        spec.dataset = d.clone();
    }
    if let Some(s) = &a.split {
        spec.split = s.parse().map_err(usage)?;
    }
    if let Some(f) = &a.split_file {
        spec.split_file = Some(f.clone());
    }
    if let Some(s) = &a.systems {
        spec.systems = s.clone();
    }
    if let Some(b) = &a.budget_tokens {
        spec.budgets = b
            .iter()
            .map(|x| parse_budget(x))
            .collect::<anyhow::Result<_>>()
            .map_err(|e| usage(format!("{e:#}")))?;
    }
    if let Some(r) = &a.reader_tokenizer {
        spec.reader_tokenizer = r.clone();
    }
    if let Some(c) = &a.cutoffs {
        spec.cutoffs = c.clone();
    }
    if let Some(n) = a.candidate_limit {
        spec.candidate_limit = n;
    }
    spec.max_questions = a.max_questions;
    spec.stratified = a.stratified;
    for raw in &a.abstention_threshold {
        let (signal, t) =
            raw.split_once('=').and_then(|(s, v)| Some((s, v.parse::<f32>().ok()?))).ok_or_else(
                || usage(format!("--abstention-threshold {raw:?}: expected SIGNAL=VALUE")),
            )?;
        check_abstention_threshold(signal, t)
            .map_err(|e| usage(format!("--abstention-threshold: {e:#}")))?;
        spec.abstention_thresholds.insert(signal.to_owned(), t);
    }
    if let Some(name) = &a.encoder {
        spec.encoder = evicortex_eval::run_config::check_encoder(name)
            .map_err(|e| usage(format!("--encoder: {e:#}")))?;
    }
    if !a.also_encoder.is_empty() {
        spec.also_encoders = a
            .also_encoder
            .iter()
            .map(|name| evicortex_eval::run_config::check_encoder(name))
            .collect::<anyhow::Result<_>>()
            .map_err(|e| usage(format!("--also-encoder: {e:#}")))?;
    }
    if let Some(raw) = &a.reranker {
        spec.reranker = Some(
            evicortex_eval::run_config::check_reranker(raw)
                .map_err(|e| usage(format!("--reranker: {e:#}")))?,
        );
    }
    if a.max_per_type.is_some() {
        spec.max_per_type = a.max_per_type;
    }
    if spec.budgets.is_empty() || spec.cutoffs.is_empty() || spec.systems.is_empty() {
        bail!(UsageError("budgets, cutoffs and systems must not be empty".into()));
    }
    if spec.benchmark == Benchmark::LongMemEval
        && spec.split != SplitName::All
        && spec.split_file.is_none()
    {
        return Err(usage("--split dev|test needs --split-file".into()));
    }
    Ok(spec)
}
