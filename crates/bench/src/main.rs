//! `evicortex-bench`: the benchmarks of EviCortex, each printing a table with ratios against an
//! anchor measured in the same run. A tool beside the product, not part of the `evicortex`
//! binary.

mod ann;
mod embed;
mod ledger;
mod progress;
mod serve_load;
mod writers;

use std::process::ExitCode;

use clap::Parser;

/// Writes a line to standard output; a failed write (a reader gone) is an error, not a panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

/// EviCortex benchmarks: each prints a table with ratios against an anchor measured in the same
/// run.
#[derive(Debug, Parser)]
#[command(
    name = "evicortex-bench",
    version,
    after_help = "Examples:\n  \
    evicortex-bench ledger\n  \
    evicortex-bench embed\n  \
    evicortex-bench writers\n  \
    evicortex-bench serve-load --server http://127.0.0.1:8787 --key KEY"
)]
pub struct BenchArgs {
    /// Which benchmark.
    #[command(subcommand)]
    pub bench: Bench,
}

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Ledger append throughput (batches of 1, 100, 10,000), verify time and bytes per turn,
    /// against plain rusqlite inserts of the same rows.
    #[command(after_help = "Works in a temporary directory (under --work-dir if given).\n\n\
        Examples:\n  \
        evicortex-bench ledger\n  \
        evicortex-bench ledger --turns 20000 --single-turns 1000 --large-turns 200000")]
    Ledger(ledger::LedgerBenchArgs),
    /// Encoder throughput on real LongMemEval turns (batch sizes, sorted and unsorted, real and
    /// padded tokens/s, peak RSS, fraction of the GEMM peak) against PyTorch
    /// sentence-transformers run in the same invocation.
    #[command(after_help = "Needs the pinned model (evicortex model fetch) and, for the anchor, \
        the venv made by bench/setup_venv.sh; run from the repository root.\n\n\
        Examples:\n  \
        evicortex-bench embed\n  \
        evicortex-bench embed --sample 256 --batch-sizes 8,32 --no-anchor")]
    Embed(embed::EmbedBenchArgs),
    /// The HNSW vector index against exact cosine on real embeddings: recall@50 of its candidates
    /// (with and without an as-of filter), build time, bytes on disk, and compile-path latency
    /// beside the exact scan, at 10k, 100k and 1M vectors in one namespace.
    #[command(
        after_help = "Prepare the audit store once (real LongMemEval S text), embed it, then \
        run; run from the repository root.\n\n\
        Examples:\n  \
        evicortex-bench ann prepare --audit-store ann-audit --vectors 100000\n  \
        nice -n 15 evicortex --store ann-audit embed --overlength window\n  \
        evicortex-bench ann run --audit-store ann-audit --sizes 10000,100000"
    )]
    Ann(ann::AnnBenchArgs),
    /// Concurrent durable appends (one turn per write from many threads) through group commit,
    /// against plain rusqlite with one transaction per write, in the same run.
    #[command(after_help = "Works in a temporary directory (under --work-dir if given).\n\n\
        Examples:\n  \
        evicortex-bench writers\n  \
        evicortex-bench writers --writers 50 --seconds 2")]
    Writers(writers::WritersBenchArgs),
    /// HTTP load on running `evicortex serve` processes: appends, compiles and erasures over
    /// many keep-alive connections spread over the servers (appends optionally at a fixed
    /// rate), sampled every interval (throughput, p50/p99, errors, the servers' RSS); then every
    /// acknowledged append is read back through the export and the ledger verified.
    #[command(
        after_help = "Start the servers first (bench/load-test-servers and bench/soak do); the key may come from EVICORTEX_LOAD_KEY.\n\n\
        Examples:\n  \
        evicortex-bench serve-load --server http://127.0.0.1:8787 --key KEY\n  \
        evicortex-bench serve-load --server A --server B --key K --namespaces 50\n  \
        evicortex-bench serve-load --server A --key K --mix append=4,compile=1,erase=1\n  \
        evicortex-bench serve-load --server A --append-rate 2000 --mix compile=1"
    )]
    ServeLoad(serve_load::ServeLoadArgs),
}

fn main() -> ExitCode {
    let args = BenchArgs::parse();
    let result = match &args.bench {
        Bench::Ledger(args) => ledger::run(args),
        Bench::Embed(args) => embed::run(args),
        Bench::Ann(args) => ann::run(args),
        Bench::Writers(args) => writers::run(args),
        Bench::ServeLoad(args) => serve_load::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
