//! The rerankers behind the seam, on real weights: the second-stage cosine on the pinned
//! all-mpnet-base-v2 (fetched by `evicortex model fetch --all`; the test fails, never skips,
//! without it), and the cross-encoder on a small generated model (bench venv).

mod cosine;
mod cross;
