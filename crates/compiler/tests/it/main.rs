//! Integration tests of the compiler over fixed and generated corpora (no ledger, no model).

/// Refusals: inconsistent inputs and configurations.
mod errors;
/// The fill of budget slack after the exact fit.
mod fill;
/// Builders for synthetic corpora and precomputed vectors.
mod fixture;
/// The default's mechanisms: context, names, time window, long-turn rule.
mod mechanisms;
/// The background precount: packs meet only lines it counted.
mod precount;
/// Properties: budget, isolation, as-of, erasure, determinism.
mod properties;
/// Snapshots of compiled contexts for fixed inputs.
mod snapshots;
/// The mechanisms for evidence spread over turns and sessions: feedback, links, deeper named
/// lists, excerpts of long turns, the compact layout.
mod spread_evidence;
/// The lexical lists searched beside the dense lists: the same compile.
mod stages_beside;
