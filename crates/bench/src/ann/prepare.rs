//! `evicortex-bench ann prepare`: writes the audit namespace into the audit store's ledger.

use crate::outln;
use std::path::PathBuf;

use anyhow::Context;
use evicortex::{AppendStatus, Memory};
use evicortex_embed::{EmbeddingRole, Overlength};
use evicortex_eval::{datasets::longmemeval::LongMemEvalDataset, split::SplitFile};

use super::audit_set::{self, Part};
use crate::{ann::load_encoder, progress};

/// Arguments of `evicortex-bench ann prepare`.
#[derive(Debug, clap::Args)]
pub struct PrepareArgs {
    /// The audit store (created if absent; never your memory store).
    #[arg(long, value_name = "DIR")]
    pub audit_store: PathBuf,
    /// Vectors the namespace must reach (turns longer than the encoder's maximum count once per
    /// 64-token-overlap window).
    #[arg(long, default_value_t = 1_000_000)]
    pub vectors: usize,
    /// The LongMemEval S file (default: under the data directory).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// The question split (default: `longmemeval/split.tsv` under the data directory).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
}

/// The overlength policy the audit set is embedded under (the evaluation's).
pub const AUDIT_OVERLENGTH: Overlength = Overlength::Window { overlap_tokens: WINDOW_OVERLAP };

const WINDOW_OVERLAP: usize = 64;

/// Turns appended per ledger transaction.
const BATCH: usize = 20_000;

/// Reads LongMemEval S and its split file (default: the evaluation data directory's).
pub(super) fn read_longmemeval(
    dataset: Option<&std::path::Path>,
    split: Option<&std::path::Path>,
) -> anyhow::Result<(LongMemEvalDataset, SplitFile)> {
    let data_dir = evicortex_eval::data_dir(std::path::Path::new("."));
    let dataset = dataset.map_or_else(
        || data_dir.join("longmemeval/longmemeval_s_cleaned.499of500.json.gz"),
        PathBuf::from,
    );
    let split = split.map_or_else(|| data_dir.join("longmemeval/split.tsv"), PathBuf::from);
    let spinner = progress::spinner("reading LongMemEval S");
    let data = LongMemEvalDataset::read(&dataset, &|_| true)
        .with_context(|| format!("reading {}", dataset.display()))?;
    let split = SplitFile::read(&split).with_context(|| format!("reading {}", split.display()))?;
    spinner.finish_and_clear();
    Ok((data, split))
}

/// Runs `prepare`.
pub fn run(args: &PrepareArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.vectors > 0, "--vectors must be at least 1");
    let (data, split) = read_longmemeval(args.dataset.as_deref(), args.split.as_deref())?;
    let is_dev =
        |id: &str| matches!(split.assignment.get(id), Some(evicortex_eval::split::SplitName::Dev));
    let encoder = load_encoder(AUDIT_OVERLENGTH)?;
    let max_tokens = encoder.identity().max_tokens;

    let spinner = progress::spinner("choosing turns");
    // Every turn is at least one vector, so the first `vectors` turns are enough; windowed
    // turns count once per window, so the cut comes earlier.
    let mut turns = Vec::new();
    let mut parts = Vec::new();
    audit_set::for_each_turn(&data, &is_dev, &mut |part, turn| {
        parts.push(part);
        turns.push(turn);
        turns.len() < args.vectors
    })?;
    let mut vectors = 0usize;
    let mut keep = 0usize;
    'count: for chunk in turns.chunks(4096) {
        let texts: Vec<&str> = chunk.iter().map(|t| t.text.as_str()).collect();
        for tokens in encoder.count_tokens_many(EmbeddingRole::Document, &texts)? {
            if vectors >= args.vectors {
                break 'count;
            }
            vectors += windows(tokens, max_tokens, WINDOW_OVERLAP);
            keep += 1;
        }
    }
    turns.truncate(keep);
    parts.truncate(keep);
    spinner.finish_and_clear();
    anyhow::ensure!(
        vectors >= args.vectors,
        "LongMemEval S yields only {vectors} vectors under this construction"
    );

    let memory = Memory::open(&args.audit_store)
        .with_context(|| format!("opening {}", args.audit_store.display()))?;
    let bar = progress::bar(turns.len() as u64, "appending");
    let mut new = 0usize;
    for batch in turns.chunks(BATCH) {
        let receipt = memory.append(batch)?;
        new += receipt.outcomes.iter().filter(|o| o.status == AppendStatus::Appended).count();
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    let by_part = |part: Part| parts.iter().filter(|&&p| p == part).count();
    outln!(
        "audit namespace {:?} in {}: {} turns ({new} new), {vectors} vectors once embedded; \
         dev turns {}, dev sentence pieces {}, other sentence pieces {}",
        audit_set::AUDIT_NAMESPACE,
        args.audit_store.display(),
        turns.len(),
        by_part(Part::DevTurn),
        by_part(Part::DevPiece),
        by_part(Part::OtherPiece),
    )?;
    outln!(
        "next: nice -n 15 evicortex --store {} embed --overlength window   (resumable)",
        args.audit_store.display()
    )?;
    Ok(())
}

/// Vectors a text of `tokens` encoder tokens (special tokens included) gets under windowing.
pub fn windows(tokens: usize, max_tokens: usize, overlap: usize) -> usize {
    if tokens <= max_tokens {
        return 1;
    }
    let (content, width) = (tokens - 2, max_tokens - 2);
    1 + (content - width).div_ceil(width - overlap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_the_encoders_rule() {
        assert_eq!(windows(256, 256, 64), 1);
        assert_eq!(windows(257, 256, 64), 2);
        // 254 content tokens per window, a step of 190: 254 + 190 = 444 content tokens in two.
        assert_eq!(windows(446, 256, 64), 2);
        assert_eq!(windows(447, 256, 64), 3);
    }
}
