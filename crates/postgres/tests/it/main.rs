//! Integration tests of the PostgreSQL ledger. They need a server: set
//! `EVICORTEX_TEST_POSTGRES_URL` (started by `scripts/postgres start`), and for the read-replica
//! tests the pair `scripts/postgres start-replicated` prints, for the TLS tests the server
//! `scripts/postgres start-tls` prints; without them every test that needs
//! one panics saying so. Each test works in a database of its own, dropped at the
//! end, so the tests run in parallel.

mod append;
mod concurrency;
mod connect;
mod erase;
mod erase_readback;
/// Files holding a needle, read back after an erasure.
#[path = "../support/files_holding.rs"]
mod files_holding;
/// Several batches committed together, each under its own savepoint.
mod group_commit;
mod migrate;
/// The connection pool: its cap, sharing, and reconnecting.
mod pool;
mod replica;
mod round_trip;
mod schema;
mod support;
mod tamper;
/// A database of its own per test (shared with the facade's and the CLI's suites).
#[path = "../support/test_db.rs"]
mod test_db;
mod tls;
/// A database of its own on the TLS server (shared with the facade's suite).
#[path = "../support/tls_db.rs"]
mod tls_db;
mod vectors_erase;
mod vectors_exact;
mod vectors_fixture;
mod vectors_isolation;
mod vectors_mirror;
mod vectors_recall;
