//! Integration tests of the `evicortex` binary: each runs the real binary on a temporary store.

/// Shared helpers: running the binary, reading a store's files.
mod cli;

/// `evicortex compile`: cited context within budget, reproducible JSON, as-of, refusals.
mod compile;
/// SIGKILL at random moments during ingestion: every acknowledged batch survives, none is partial.
mod crash;
/// Erase: texts gone from every file, verify still passing.
mod erase;
/// Export: byte-exact round trips through `ingest`.
mod export;
/// Ingest: good input, idempotence, and every kind of bad input with its exit code and message.
mod ingest;
/// `evicortex mcp`: a real MCP client handshake over the child's stdio; remember, recall, forget.
mod mcp_stdio;
/// `evicortex model list / verify NAME / fetch NAME` over the catalogue.
mod model_catalogue;
/// `evicortex model` and `evicortex embed`: verification, exit codes, the ingest hook, catch-up.
mod model_embed;
/// `evicortex serve`: concurrent appends, SIGTERM, clean exit, verify, no acknowledged turn lost.
mod serve_sigterm;
/// Verify and the open-time check on tampered stores.
mod verify;
