//! Append-only, hash-chained evidence ledger on embedded SQLite.
