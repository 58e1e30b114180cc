//! `evicortex-bench embed`: a pinned encoder's throughput on real LongMemEval turns, against
//! PyTorch sentence-transformers run in the same invocation on the same texts and batches
//! (`--model NAME` picks the catalogue model; all-MiniLM-L6-v2 by default).
//!
//! Every configuration (batch size x sorted or unsorted) embeds the same sample. Batches are
//! formed identically on both sides: consecutive groups of `batch` texts, after sorting by token
//! count or in the sample's random order. Real tokens are the sequences' own tokens; padded
//! tokens count every sequence at its batch's longest length (what a padded implementation
//! computes). The fraction of the matrix-product peak divides the encoder's useful FLOP rate
//! (linear layers and attention products on real tokens) by the best f32 GEMM rate measured in
//! the same run on the same kernels.

mod anchor;
mod gemm_peak;
mod sample;

use std::{path::PathBuf, time::Instant};

use evicortex_embed::{
    BatchLimits, DEFAULT_MODEL, EmbeddingRole, Encoder, ModelCache, plan_batches,
};

use self::{anchor::AnchorRun, sample::PeakRss};
use crate::{outln, progress};

/// Arguments of `evicortex-bench embed`.
#[derive(Debug, clap::Args)]
pub struct EmbedBenchArgs {
    /// The catalogue model to measure (`evicortex model list`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Turns sampled from the dataset (distinct texts that fit the encoder's maximum length).
    #[arg(long, default_value_t = 512)]
    pub sample: usize,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    pub batch_sizes: Vec<usize>,
    /// The LongMemEval file the turns come from (default: the S file under the data directory).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Seed of the sample.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Python of the anchor's virtual environment (made by bench/setup_venv.sh).
    #[arg(long, value_name = "FILE")]
    pub anchor_python: Option<PathBuf>,
    /// The anchor script.
    #[arg(long, value_name = "FILE", default_value = "bench/anchor_embed.py")]
    pub anchor_script: PathBuf,
    /// Run without the PyTorch anchor (the ratio column then says so).
    #[arg(long)]
    pub no_anchor: bool,
}

struct Config {
    batch: usize,
    sorted: bool,
}

impl Config {
    fn name(&self) -> String {
        format!("b{}-{}", self.batch, if self.sorted { "sorted" } else { "unsorted" })
    }

    /// Batches of exactly `batch` sequences: the padded-token cap can never bind.
    fn limits(&self, max_tokens: usize) -> BatchLimits {
        BatchLimits {
            max_sequences: self.batch,
            max_padded_tokens: self.batch * max_tokens,
            sort_by_length: self.sorted,
        }
    }
}

struct Measured {
    wall_s: f64,
    cpu_s: f64,
    peak_rss_mib: f64,
}

/// Runs the benchmark and prints the table.
pub fn run(args: &EmbedBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.sample > 0, "--sample must be at least 1");
    anyhow::ensure!(
        !args.batch_sizes.is_empty() && args.batch_sizes.iter().all(|&b| b > 0),
        "--batch-sizes must list positive sizes"
    );
    let anchor_python = if args.no_anchor { None } else { Some(anchor::python(args)?) };
    let model = evicortex_embed::pinned_model(&args.model)?;
    let cache = ModelCache::from_env()?;
    let model_dir = cache.install_dir(model.manifest());
    let mut encoder = model.load(&cache, model.default_config())?;
    let dataset = match &args.dataset {
        Some(path) => path.clone(),
        None => evicortex_eval::data_dir(std::path::Path::new("."))
            .join("longmemeval/longmemeval_s_cleaned.499of500.json.gz"),
    };
    let spinner = progress::spinner("sampling turns");
    let sample = sample::sample_turns(&dataset, &encoder, args.sample, args.seed)?;
    spinner.finish_and_clear();
    let texts: Vec<&str> = sample.texts.iter().map(String::as_str).collect();
    let lengths = &sample.token_counts;
    let real_tokens: usize = lengths.iter().sum();
    let flops: f64 = lengths.iter().map(|&l| encoder.forward_flops(l)).sum();
    let max_tokens = encoder.config().max_tokens;

    let configs: Vec<Config> = args
        .batch_sizes
        .iter()
        .flat_map(|&batch| [true, false].map(|sorted| Config { batch, sorted }))
        .collect();
    let mut peak = PeakRss;
    let mut ours = Vec::new();
    let bar = progress::bar(configs.len() as u64, "evicortex");
    encoder.embed(EmbeddingRole::Document, &texts[..texts.len().min(8)])?;
    for config in &configs {
        encoder.set_batch_limits(config.limits(max_tokens));
        peak.reset()?;
        let (wall0, cpu0) = (Instant::now(), sample::process_cpu_seconds()?);
        let vectors = encoder.embed(EmbeddingRole::Document, &texts)?;
        let wall_s = wall0.elapsed().as_secs_f64();
        let cpu_s = sample::process_cpu_seconds()? - cpu0;
        anyhow::ensure!(vectors.len() == texts.len(), "the encoder returned a vector per text");
        ours.push(Measured { wall_s, cpu_s, peak_rss_mib: peak.read_mib()? });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let gemm_gflops = gemm_peak::measure_sgemm_gflops(
        encoder.model_config().hidden_size(),
        encoder.model_config().intermediate_size(),
    )?;

    // The anchor gets each configuration's batches as one order cut every `batch` texts: the
    // same batches the encoder planned.
    let anchor_configs: Vec<(String, usize, Vec<usize>)> = configs
        .iter()
        .map(|c| (c.name(), c.batch, plan_batches(lengths, c.limits(max_tokens)).concat()))
        .collect();
    let anchor_runs: Option<Vec<AnchorRun>> = match &anchor_python {
        Some(python) => Some(anchor::run(
            python,
            &args.anchor_script,
            &model_dir,
            max_tokens,
            &sample,
            &anchor_configs,
        )?),
        None => None,
    };

    outln!(
        "evicortex-bench embed: {} LongMemEval S turns (seed {}), {} real tokens, {} encoder \
         identity {}",
        texts.len(),
        args.seed,
        real_tokens,
        encoder.identity().model,
        &encoder.identity_digest().to_string()[..16],
    )?;
    if let Some(note) = &sample.note {
        outln!("{note}")?;
    }
    outln!(
        "threads: {}; f32 GEMM peak measured in this run: {gemm_gflops:.1} GFLOP/s; model work: \
         {:.2} GFLOP over the sample (linear layers + attention products)",
        std::thread::available_parallelism().map_or(1, usize::from),
        flops / 1e9
    )?;
    match &anchor_runs {
        Some(runs) => outln!(
            "anchor: PyTorch {} + sentence-transformers, {} threads, same texts and batches",
            runs.first().map_or("?", |r| r.torch.as_str()),
            runs.first().map_or(0, |r| r.threads)
        ),
        None => outln!("anchor: not run (--no-anchor); ratio column is n/a"),
    }?;
    outln!()?;
    outln!(
        "| batch | order    | real tok/s | padded tok/s | cores busy | peak RSS MiB | % GEMM peak | anchor real tok/s | anchor cores busy | anchor peak RSS MiB | ratio | CPU ratio |"
    )?;
    outln!(
        "|------:|----------|-----------:|-------------:|-----------:|-------------:|------------:|------------------:|------------------:|--------------------:|------:|----------:|"
    )?;
    for (i, (config, m)) in configs.iter().zip(&ours).enumerate() {
        let padded = padded_tokens(lengths, config.limits(max_tokens));
        let real_rate = real_tokens as f64 / m.wall_s;
        let (anchor_rate, anchor_busy, anchor_rss, ratio, cpu_ratio) = match &anchor_runs {
            Some(runs) => {
                let a = &runs[i];
                let rate = real_tokens as f64 / a.wall_s;
                (
                    format!("{rate:.0}"),
                    format!("{:.2}", a.cpu_s / a.wall_s),
                    format!("{:.0}", a.peak_rss_mib),
                    format!("{:.2}", real_rate / rate),
                    format!("{:.2}", a.cpu_s / m.cpu_s),
                )
            }
            None => ("n/a".into(), "n/a".into(), "n/a".into(), "n/a".into(), "n/a".into()),
        };
        outln!(
            "| {:>5} | {:<8} | {:>10.0} | {:>12.0} | {:>10.2} | {:>12.0} | {:>10.1}% | {:>17} | {:>17} | {:>19} | {:>5} | {:>9} |",
            config.batch,
            if config.sorted { "sorted" } else { "unsorted" },
            real_rate,
            padded as f64 / m.wall_s,
            m.cpu_s / m.wall_s,
            m.peak_rss_mib,
            100.0 * flops / m.wall_s / 1e9 / gemm_gflops,
            anchor_rate,
            anchor_busy,
            anchor_rss,
            ratio,
            cpu_ratio,
        )?;
    }
    outln!()?;
    outln!(
        "ratio = evicortex real tok/s / anchor real tok/s (above 1 is faster). CPU ratio = \
         anchor CPU seconds / evicortex CPU seconds for the same work (above 1 is cheaper; less \
         sensitive than wall time to other load on a shared machine). Cores busy = CPU seconds \
         / wall seconds. Peak RSS is the process's resident peak during the configuration (the \
         model's weights included)."
    )?;
    Ok(())
}

/// Tokens a padded implementation computes under `limits`: each batch at its longest sequence.
fn padded_tokens(lengths: &[usize], limits: BatchLimits) -> usize {
    plan_batches(lengths, limits)
        .iter()
        .map(|b| b.len() * b.iter().map(|&i| lengths[i]).max().unwrap_or(0))
        .sum()
}
