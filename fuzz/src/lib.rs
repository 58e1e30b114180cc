//! The fuzz targets' bodies: one module per parser that takes outside input, each with
//! `run(data)`, which panics when a property is violated. The libFuzzer binaries in
//! `fuzz_targets/` call them; `tests/corpus.rs` runs the committed seeds and regression inputs
//! through them as ordinary tests.

mod edits;
mod eval_turns;

/// A target's body: panics when a property is violated.
pub type Target = fn(&[u8]);

/// The targets, by the name of their binary, seed folder (`seeds/NAME`) and regression folder
/// (`regressions/NAME`).
pub const TARGETS: &[(&str, Target)] = &[
    ("jsonl", jsonl::run),
    ("longmemeval", longmemeval::run),
    ("locomo", locomo::run),
    ("http_bodies", http_bodies::run),
    ("mcp_messages", mcp_messages::run),
    ("reader_tokens", reader_tokens::run),
    ("encoder_tokens", encoder_tokens::run),
    ("ledger_records", ledger_records::run),
    ("postgres_records", postgres_records::run),
    ("lexical_index_file", lexical_index_file::run),
    ("graph_file", graph_file::run),
    ("embedding_cache_rows", embedding_cache_rows::run),
    ("compile_options", compile_options::run),
];

pub mod compile_options;
pub mod embedding_cache_rows;
pub mod encoder_tokens;
pub mod graph_file;
pub mod http_bodies;
pub mod jsonl;
pub mod ledger_records;
pub mod lexical_index_file;
pub mod locomo;
pub mod longmemeval;
pub mod mcp_messages;
pub mod postgres_records;
pub mod reader_tokens;
