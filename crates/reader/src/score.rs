//! Answer scoring: LoCoMo's released token F1, a deterministic answer-containment check, and
//! LongMemEval's released judge prompts run by any [`crate::Reader`].

pub(crate) mod containment;
pub(crate) mod locomo;
pub(crate) mod longmemeval;
pub(crate) mod porter;
