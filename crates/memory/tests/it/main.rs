//! Integration tests of the `evicortex` facade, one module per scenario.

/// The graph file under a failing fsync or write (Linux: an LD_PRELOAD shim).
#[cfg(target_os = "linux")]
mod ann_faults;
/// The HNSW candidate layer behind compile and its index files.
#[cfg(unix)]
mod ann_index;
/// `Memory::answer` with the real smallest reader: exact counts, refusals, abstention.
mod answer;
/// A compile right after an append finds the turn and says when dense coverage lags.
mod dense_lag;
/// Erasure reaches every attached derived store.
mod derived_purge;
/// Export writes JSONL that the parser takes back, texts byte for byte (property test).
mod export_round_trip;
/// Builds the fault shim of the ledger's tests.
#[cfg(target_os = "linux")]
#[path = "../../../ledger/tests/support/faultfs.rs"]
mod faultfs_shim;
/// Two encoders embedded, fused, named and purged together.
mod fused_encoders;
/// Indexes kept up to date between appends compile what a fresh memory compiles.
mod incremental_indexes;
/// The lexical index files: loaded by the next process, purged by erasure, on either backend.
#[cfg(unix)]
mod lexical_files;
/// The same scenario on the embedded ledger and on PostgreSQL.
mod postgres_backend;
/// A store over a PostgreSQL hot standby: compiles what the primary compiles, refuses writes.
mod postgres_replica;
/// Two servers of one PostgreSQL store share its embedding cache.
mod postgres_shared_cache;
/// A PostgreSQL store over verified TLS.
mod postgres_tls;
/// A PostgreSQL store's dense candidates from pgvector, and its vectors purged on erasure.
mod postgres_vectors;
/// The store directory and the embedding cache are private to their owner.
#[cfg(unix)]
mod private_files;
/// The second-stage reranker through the facade, and its candidate vectors purged on erasure.
mod second_stage;
/// One `Memory` shared by threads.
mod shared;
/// A database of its own per test on the PostgreSQL test servers (the PostgreSQL crate's helper).
#[path = "../../../postgres/tests/support/test_db.rs"]
mod test_db;
/// Each test's store on the backend EVICORTEX_TEST_BACKEND names.
mod test_store;
/// A database of its own on the TLS test server (the PostgreSQL crate's helper).
#[path = "../../../postgres/tests/support/tls_db.rs"]
mod tls_db;
