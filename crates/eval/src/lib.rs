//! LongMemEval and LoCoMo adapters, comparator, controls, metrics, runner.
