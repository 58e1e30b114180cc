//! Lexical retrieval: a documented analyzer and an in-memory BM25 inverted index.
//!
//! [`analyze`] turns text into terms (the rules are in its module docs);
//! [`Bm25Index`] holds one namespace's documents, grows as turns arrive, records the ledger
//! position it covers and answers top-N queries with a filter applied while candidates are scored,
//! not after a cut, skipping (MaxScore) documents that cannot reach the top N.
//!
//! ```
//! use evicortex_core::TurnId;
//! use evicortex_lexical::{Bm25Index, Bm25Params, analyze};
//!
//! let mut index = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
//! index.add(TurnId::from_raw(1), "We upgraded to v2.3.1 yesterday").unwrap();
//! index.add(TurnId::from_raw(2), "gpt-4o reads the user_id column").unwrap();
//! index.mark_covered(TurnId::from_raw(2)).unwrap();
//! let hits = index.search(&analyze("which user_id?"), 10, |_| true);
//! assert_eq!(hits[0].key, TurnId::from_raw(2));
//! assert_eq!(index.covers(), Some(TurnId::from_raw(2)));
//! ```
#![warn(missing_docs)]

mod analyzer;
mod bm25;
mod error;
mod inverted_index;
mod max_score;
mod term_counts;

pub use crate::{
    analyzer::{ANALYZER_VERSION, Analyzer, analyze, analyze_into},
    bm25::{Bm25Params, LexicalHit, MAX_K1, bm25_idf},
    error::LexicalError,
    inverted_index::{Bm25Index, DocRow, SharedSearch},
    term_counts::TermCounts,
};
