//! The PyTorch sentence-transformers anchor: `bench/anchor_embed.py` in the virtual environment
//! that `bench/setup_venv.sh` makes, fed the same texts and batch orders over stdin.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, bail};
use serde::Deserialize;

use super::{EmbedBenchArgs, sample::Sample};

/// One configuration as the anchor measured it.
#[derive(Debug, Deserialize)]
pub struct AnchorRun {
    /// The configuration's name.
    pub name: String,
    /// Wall seconds.
    pub wall_s: f64,
    /// CPU seconds of the process (all threads).
    pub cpu_s: f64,
    /// Peak resident set during the configuration, MiB.
    pub peak_rss_mib: f64,
    /// torch version (from the ready line).
    #[serde(default)]
    pub torch: String,
    /// torch's intra-op threads (from the ready line).
    #[serde(default)]
    pub threads: usize,
}

#[derive(Deserialize)]
struct Ready {
    torch: String,
    threads: usize,
}

/// The anchor's Python: `--anchor-python`, else the venv under `$EVICORTEX_BENCH_VENV` or the
/// user's cache. Missing means an error with the command that makes it.
pub fn python(args: &EmbedBenchArgs) -> anyhow::Result<PathBuf> {
    let python = match &args.anchor_python {
        Some(p) => p.clone(),
        None => {
            let venv = match std::env::var_os("EVICORTEX_BENCH_VENV") {
                Some(v) if !v.is_empty() => PathBuf::from(v),
                _ => dirs_cache()?.join("evicortex/bench-venv"),
            };
            venv.join("bin/python")
        }
    };
    if !python.is_file() {
        bail!(
            "the anchor's Python {} does not exist: run `bench/setup_venv.sh` (PyTorch and \
             sentence-transformers from PyPI), or pass --no-anchor",
            python.display()
        );
    }
    if !args.anchor_script.is_file() {
        bail!(
            "the anchor script {} does not exist: run from the repository root or pass \
             --anchor-script",
            args.anchor_script.display()
        );
    }
    Ok(python)
}

fn dirs_cache() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache"))
}

/// Runs every configuration `(name, batch, order)` in the anchor, which cuts `order` every
/// `batch` texts; returns them in order.
pub fn run(
    python: &Path,
    script: &Path,
    model_dir: &Path,
    max_tokens: usize,
    sample: &Sample,
    configs: &[(String, usize, Vec<usize>)],
) -> anyhow::Result<Vec<AnchorRun>> {
    let request = serde_json::json!({
        "model_dir": model_dir,
        "max_seq_length": max_tokens,
        "threads": std::thread::available_parallelism().map_or(1, usize::from),
        "texts": sample.texts,
        "configs": configs.iter().map(|(name, batch, order)| serde_json::json!({
            "name": name,
            "batch_size": batch,
            "order": order,
        })).collect::<Vec<_>>(),
    });
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} {}", python.display(), script.display()))?;
    {
        let mut stdin = child.stdin.take().context("the anchor's stdin")?;
        serde_json::to_writer(&mut stdin, &request).context("sending the anchor its request")?;
        stdin.flush()?;
    }
    let stdout = child.stdout.take().context("the anchor's stdout")?;
    let (mut ready, mut runs) = (None, Vec::new());
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the anchor's output")?;
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("the anchor printed a line that is not JSON: {line}"))?;
        match value.get("event").and_then(|e| e.as_str()) {
            Some("ready") => ready = Some(serde_json::from_value::<Ready>(value)?),
            Some("config") => runs.push(serde_json::from_value::<AnchorRun>(value)?),
            _ => bail!("the anchor printed an unknown event: {line}"),
        }
    }
    let status = child.wait().context("waiting for the anchor")?;
    if !status.success() {
        bail!("the anchor exited with {status}");
    }
    let ready = ready.context("the anchor never said it was ready")?;
    if runs.len() != configs.len() {
        bail!("the anchor measured {} of {} configurations", runs.len(), configs.len());
    }
    for (run, (name, ..)) in runs.iter_mut().zip(configs) {
        if &run.name != name {
            bail!("the anchor answered {} where {name} was expected", run.name);
        }
        run.torch.clone_from(&ready.torch);
        run.threads = ready.threads;
    }
    Ok(runs)
}
