//! Controls: the released BM25 retriever and the baselines every report includes.

pub mod bm25_official;
pub mod bm25_okapi;
