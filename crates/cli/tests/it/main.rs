//! Integration tests of the `evicortex` binary: each runs the real binary on a temporary store.

/// Shared helpers: running the binary, reading a store's files.
mod cli;

/// `evicortex answer` with the real smallest reader: answer, citations, identity, refusals.
mod answer;
/// `evicortex serve` flooded with answers and compiles: answers or 429s, bounded memory.
mod bounded_requests;
/// `evicortex compile`: cited context within budget, reproducible JSON, as-of, refusals.
mod compile;
/// SIGKILL at random moments during ingestion: every acknowledged batch survives, none is partial.
mod crash;
/// SIGKILL at random points beyond ingest: serve under load and at shutdown, erase and its scrub,
/// embed catch-up, the HNSW index file; a table of where the kills landed (slow).
mod crash_points;
/// Erase: texts gone from every file, verify still passing.
mod erase;
/// Export: byte-exact round trips through `ingest`.
mod export;
/// Builds the fault shim of the ledger's tests.
#[path = "../../../ledger/tests/support/faultfs.rs"]
mod faultfs_shim;
/// Fault injection: failing fsync and writes, a full disk, a read-only store.
mod faults;
/// A failing disk under `evicortex serve`: 500, then 503 until a restart; a full one 507;
/// nothing acknowledged lost.
mod faults_http;
/// Files holding a needle (the PostgreSQL crate's read-back helper).
#[path = "../../../postgres/tests/support/files_holding.rs"]
mod files_holding;
/// Ingest: good input, idempotence, and every kind of bad input with its exit code and message.
mod ingest;
/// The web inspector at `/ui` in headless Chromium against a real `evicortex serve`.
mod inspector;
/// `evicortex keys`: scope flags and namespace checked before a key exists.
mod keys;
/// `evicortex mcp`: a real MCP client handshake over the child's stdio; remember, recall, forget.
mod mcp_stdio;
/// `evicortex migrate`: a format-version-1 store refused with what to do, then migrated.
mod migrate;
mod migrate_postgres;
/// `evicortex model list / verify NAME / fetch NAME` over the catalogue.
mod model_catalogue;
/// `evicortex model` and `evicortex embed`: verification, exit codes, the ingest hook, catch-up.
mod model_embed;
/// Store files private to their owner whatever the umask.
#[cfg(unix)]
mod permissions;
/// Faults of a PostgreSQL store's database: dropped connections, a statement timeout, a crash
/// and restart, a full disk, a failover; 503 or 507 and exit 3, nothing acknowledged lost.
mod postgres_faults;
/// `serve` and `mcp` on a PostgreSQL store: append, compile from pgvector, erase, verify.
mod postgres_front_ends;
/// `--store postgres://<hot standby>`: reads what the primary wrote; writes refused, exit 2.
mod postgres_replica;
/// Several servers over one PostgreSQL database: keys, settings and erasure shared.
mod postgres_shared;
/// The evaluation's compiled contexts are `evicortex compile --json`'s, byte for byte.
mod product_path;
/// `evicortex serve --index-cache-mib`: a namespace bigger than the budget is reported.
mod serve_index_cache;
/// `evicortex serve`: concurrent appends, SIGTERM, clean exit, verify, no acknowledged turn lost.
mod serve_sigterm;
/// A store directory's files and their bytes (the ledger's test helper).
#[path = "../../../ledger/tests/support/store_bytes.rs"]
mod store_bytes;
/// `evicortex encoders`: the store's encoder list, used by ingest and compile.
mod store_encoders;
/// A database of its own per test on the PostgreSQL test servers (the PostgreSQL crate's helper).
#[path = "../../../postgres/tests/support/test_db.rs"]
mod test_db;
/// Two processes on one store: a second writer refused, naming the holder; no stale lock.
mod two_processes;
/// Verify and the open-time check on tampered stores.
mod verify;
/// A small WebDriver client for the inspector test.
mod webdriver;
