//! Integration tests of the ledger, one module per scenario.

/// Shared builders of turns and stores.
mod fixture;

/// Append: durability contract, idempotence, conflicts, atomicity of refused batches.
mod append;
/// Concurrent readers and writers on one shared ledger.
mod concurrency;
/// Verify finds corruption of any column of any record (property test).
mod corruption;
/// Erasure: redaction records, scrubbed files, receipts, no guessable digest left.
mod erase;
/// The read-only export of every stored record, verified as it is read.
mod export;
/// Builds the fault shim (shared with the facade's and the CLI's tests).
#[path = "../support/faultfs.rs"]
mod faultfs_shim;
/// Fault injection: a failed fsync is reported and poisons the writer until reopened.
mod faults;
/// A format-version-1 ledger: refused untouched, migrated on request.
mod format_v1;
/// A format-version-2 ledger: refused, then numbered per namespace on request.
mod format_v2;
/// Open-time checks: refusing a tampered head, inspection mode, foreign files.
mod open_check;
/// Append/verify/read round trips over arbitrary batches (property test).
mod round_trip;
/// A store directory's files and their bytes (shared with the CLI's tests).
#[path = "../support/store_bytes.rs"]
mod store_bytes;
/// Reads, appends and erasures refuse records altered behind the ledger's back.
mod tamper;
