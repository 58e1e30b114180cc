//! The command line: global options and one variant per subcommand (its arguments live with
//! the command in `commands/<name>.rs`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands;

/// EviCortex: evidence-first long-term memory for LLM assistants.
#[derive(Debug, Parser)]
#[command(
    name = "evicortex",
    version,
    about,
    after_help = "Examples:\n  \
        evicortex ingest examples/sample-conversation.jsonl\n  \
        evicortex --store /tmp/mem stats --json\n  \
        evicortex verify\n\n\
        Exit codes: 0 ok, 1 internal error, 2 bad input or usage, 3 I/O failure, \
        4 integrity failure, 5 required model missing. A closed standard output (piping into \
        `head`) is not a failure: the output is dropped, the work completes, and the exit \
        code is unchanged."
)]
pub struct Cli {
    /// The store directory (EVICORTEX_HOME names it too, and nothing else: models live in
    /// $EVICORTEX_MODELS_DIR or the user's cache), or a postgres:// URL: the ledger is then
    /// that database, and the derived files live in $EVICORTEX_DERIVED_DIR or the user's cache.
    #[arg(
        long,
        global = true,
        env = "EVICORTEX_HOME",
        default_value = "evicortex-data",
        value_name = "DIR"
    )]
    pub store: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Append turns from JSONL files to the ledger (atomic, idempotent).
    Ingest(commands::ingest::IngestArgs),
    /// Recompute every digest and the whole hash chain; name the first bad record.
    Verify(commands::verify::VerifyArgs),
    /// Upgrade the store's ledger from an older format version (verified first).
    Migrate(commands::migrate::MigrateArgs),
    /// Erase a namespace, a session or one record: text removed from every file.
    Erase(commands::erase::EraseArgs),
    /// Show counts of turns, namespaces, sessions and bytes on disk.
    Stats(commands::stats::StatsArgs),
    /// Write turns as JSONL that `ingest` takes back, texts byte for byte.
    Export(commands::export::ExportArgs),
    /// Fetch, locate, verify or digest the pinned encoder's artifacts.
    Model(commands::model::ModelArgs),
    /// Embed a text with the pinned encoder, or embed the store's pending turns.
    Embed(commands::embed::EmbedArgs),
    /// Name the encoders that embed the store's turns and whose dense lists compile fuses.
    Encoders(commands::encoders::EncodersArgs),
    /// Compile a cited context for a question within a reader-token budget, or abstain.
    Compile(commands::compile::CompileArgs),
    /// Answer a question from memory: compile a context in the reader's tokens, read it, cite.
    Answer(commands::answer::AnswerArgs),
    /// Serve the HTTP API (per-namespace keys, OpenAPI at /openapi.json); SIGTERM drains.
    Serve(commands::serve::ServeArgs),
    /// Serve one namespace as MCP tools (remember, recall, forget) on stdin/stdout.
    Mcp(commands::mcp::McpArgs),
    /// Create, list or revoke API keys of the HTTP server.
    Keys(commands::keys::KeysArgs),
    /// Evaluate on LongMemEval or LoCoMo: released metrics after packing, comparator and controls.
    Eval(Box<commands::eval::EvalArgs>),
}
