//! Answer scoring: LoCoMo's released token F1, a deterministic answer-containment check, and
//! LongMemEval's released judge prompts run by any [`evicortex_reader::Reader`].

mod containment;
mod locomo;
mod longmemeval;
mod porter;

pub use self::{
    containment::contains_answer,
    locomo::{
        LocomoCategory, locomo_answer_score, locomo_multi_answer_f1, locomo_normalize_answer,
        locomo_token_f1,
    },
    longmemeval::{
        Answerability, JUDGE_DECODING, JudgeVerdict, judge_label, longmemeval_judge,
        longmemeval_judge_prompt,
    },
    porter::porter_stem,
};
