//! Benchmark adapters.

pub mod locomo;
pub mod longmemeval;
