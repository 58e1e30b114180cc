//! Benchmark adapters.

pub mod longmemeval;
