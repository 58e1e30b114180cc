//! The LongMemEval adapter (`evicortex eval`): any file content. No panic; an accepted file turns
//! into evaluation questions and ledger turns (the conversion `EvalStore::ingest` makes) without
//! panicking either.

use std::io::Write;

use evicortex_eval::datasets::longmemeval::LongMemEvalDataset;
use evicortex_eval::eval_question::EvalQuestion;

use crate::eval_turns;

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let mut file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    file.write_all(data).unwrap();
    if let Ok(dataset) = LongMemEvalDataset::read(file.path(), &|_| true) {
        for question in &dataset.questions {
            eval_turns::check(&EvalQuestion::from_longmemeval(question));
        }
    }
}
