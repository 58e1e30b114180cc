//! The benchmark's sample of real turns, and process measurements (CPU time, peak RSS).

use std::{collections::HashSet, path::Path};

use anyhow::Context;
use evicortex_embed::{EmbeddingRole, Encoder};
use evicortex_eval::datasets::longmemeval::LongMemEvalDataset;
use rand::{SeedableRng, rngs::StdRng, seq::SliceRandom};

/// Distinct turns in random order, each within the encoder's maximum length.
pub struct Sample {
    /// The texts.
    pub texts: Vec<String>,
    /// Their document-role token counts (special tokens included).
    pub token_counts: Vec<usize>,
    /// What was left out to keep every text within the maximum length, if anything.
    pub note: Option<String>,
}

/// Samples `n` distinct non-empty turns of `dataset` with `seed`. Turns longer than the
/// encoder's maximum length are skipped (and counted in the note), so that neither side
/// truncates or windows.
pub fn sample_turns(
    dataset: &Path,
    encoder: &dyn Encoder,
    n: usize,
    seed: u64,
) -> anyhow::Result<Sample> {
    let data = LongMemEvalDataset::read(dataset, &|_| true)
        .with_context(|| format!("reading {}", dataset.display()))?;
    let mut seen = HashSet::new();
    let mut all: Vec<&str> = Vec::new();
    for q in &data.questions {
        for session in &q.sessions {
            for turn in &session.turns {
                if !turn.content.trim().is_empty() && seen.insert(turn.content.as_str()) {
                    all.push(&turn.content);
                }
            }
        }
    }
    all.shuffle(&mut StdRng::seed_from_u64(seed));
    let max = encoder.identity().max_tokens;
    let (mut texts, mut token_counts, mut skipped) = (Vec::new(), Vec::new(), 0usize);
    for chunk in all.chunks(256) {
        let counts = encoder.count_tokens_many(EmbeddingRole::Document, chunk)?;
        for (&text, count) in chunk.iter().zip(counts) {
            if texts.len() == n {
                break;
            }
            if count > max {
                skipped += 1;
                continue;
            }
            texts.push(text.to_owned());
            token_counts.push(count);
        }
        if texts.len() == n {
            break;
        }
    }
    anyhow::ensure!(
        texts.len() == n,
        "{} has only {} distinct turns within {max} tokens; ask for fewer with --sample",
        dataset.display(),
        texts.len()
    );
    let note = (skipped > 0).then(|| {
        format!(
            "{skipped} sampled turns longer than {max} tokens were skipped (neither side truncates)"
        )
    });
    Ok(Sample { texts, token_counts, note })
}

/// User plus system CPU seconds of this process, all threads.
pub fn process_cpu_seconds() -> anyhow::Result<f64> {
    let stat = fs_err::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let after = stat.rfind(')').map(|i| &stat[i + 2..]).context("parsing /proc/self/stat")?;
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("short /proc/self/stat")?.parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of stat: 11 and 12 counted after the name.
    // The kernel reports them in USER_HZ, 100 on every Linux architecture.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// The process's peak resident set, reset between configurations through
/// `/proc/self/clear_refs` (writing 5 resets the peak, Linux 4.0 and later).
pub struct PeakRss;

impl PeakRss {
    /// Resets the peak to the current resident set.
    pub fn reset(&mut self) -> anyhow::Result<()> {
        fs_err::write("/proc/self/clear_refs", "5")
            .context("resetting the peak resident set through /proc/self/clear_refs")
    }

    /// The peak since the last reset, in MiB.
    pub fn read_mib(&self) -> anyhow::Result<f64> {
        let status =
            fs_err::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .context("/proc/self/status has no VmHWM line")?;
        let kib: f64 = line
            .split_whitespace()
            .nth(1)
            .context("VmHWM has no value")?
            .parse()
            .context("VmHWM is not a number")?;
        Ok(kib / 1024.0)
    }
}
