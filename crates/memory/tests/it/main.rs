//! Integration tests of the `evicortex` facade, one module per scenario.

/// `Memory::answer` with the real smallest reader: exact counts, refusals, abstention.
mod answer;
/// Erasure reaches every attached derived store.
mod derived_purge;
/// Export writes JSONL that the parser takes back, texts byte for byte (property test).
mod export_round_trip;
/// The store directory and the embedding cache are private to their owner.
#[cfg(unix)]
mod private_files;
/// One `Memory` shared by threads.
mod shared;
