//! The LoCoMo adapter (`evicortex eval`): any file content. No panic; an accepted file turns into
//! evaluation questions and ledger turns (the conversion `EvalStore::ingest` makes) without
//! panicking either.

use std::io::Write;

use evicortex_eval::datasets::locomo::LocomoDataset;
use evicortex_eval::eval_question::EvalQuestion;

use crate::eval_turns;

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    file.write_all(data).unwrap();
    if let Ok(dataset) = LocomoDataset::read(file.path()) {
        for conversation in &dataset.conversations {
            for question in EvalQuestion::from_locomo(conversation) {
                eval_turns::check(&question);
            }
        }
    }
}
