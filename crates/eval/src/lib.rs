//! Evaluation harness: strict LongMemEval and LoCoMo adapters, the released retrieval metrics
//! computed after packing, the hybrid chunk-RAG comparator, the controls, and the runner that
//! writes preregistered reports.
//!
//! ```no_run
//! use evicortex_eval::{
//!     controls::{bm25_official::rank_bm25_official, bm25_okapi::Bm25OkapiParams},
//!     datasets::longmemeval::LongMemEvalDataset,
//!     protocol::EvidenceKeys,
//!     scoring::{MeanScores, score_ranking},
//! };
//! let ds = LongMemEvalDataset::read("longmemeval_oracle.json.gz".as_ref(), &|_| true).unwrap();
//! let mut mean = MeanScores::default();
//! for q in &ds.questions {
//!     let keys = EvidenceKeys::of(q);
//!     if keys.exclusion.is_none() {
//!         mean.add(&score_ranking(&keys, &rank_bm25_official(q, Bm25OkapiParams::RELEASED), &[5, 10]));
//!     }
//! }
//! println!("{} scored, official: {}", mean.count(), ds.artifact.official);
//! ```
#![warn(missing_docs)]

pub mod answer_score;
mod artifact;
pub mod calibration_interval;
pub mod comparator;
pub mod compiled_systems;
pub mod controls;
mod data_dir;
pub mod datasets;
mod error;
pub mod eval_question;
pub mod eval_store;
pub mod metrics;
pub mod outcomes;
pub mod packed_outcomes;
pub mod pooled_calibration;
pub mod protocol;
pub mod ranking;
pub mod reader_stage;
pub mod report;
pub mod run_config;
pub mod runner;
pub mod scoring;
pub mod split;
pub mod systems;
pub mod variants;

pub use crate::{
    artifact::{ArtifactIdentity, KNOWN_ARTIFACTS, KnownArtifact, identify_file},
    data_dir::{DATA_DIR_ENV, data_dir},
    error::DatasetError,
};
