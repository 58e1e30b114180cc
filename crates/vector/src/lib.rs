//! Dense retrieval: the [`VectorIndexRead`] / [`VectorIndex`] traits and [`ExactIndex`], an exact
//! cosine index over contiguous `f32` storage.
//!
//! [`ExactIndex`] scans an int8 copy of the vectors first and rescores in `f32` every row whose
//! error bound could still reach the top `n`, so its answer equals a full `f32` scan (the
//! oracle tests check this) at a quarter of the memory traffic. Filters run on every row before
//! the cut. An approximate index (HNSW) will implement the same traits.
//!
//! ```
//! use evicortex_core::TurnId;
//! use evicortex_vector::{ExactIndex, VectorIndex, VectorIndexRead};
//!
//! let mut index = ExactIndex::new(3);
//! index.insert(TurnId::from_raw(1), &[1.0, 0.0, 0.0]).unwrap();
//! index.insert(TurnId::from_raw(2), &[0.6, 0.8, 0.0]).unwrap();
//! let hits = index.search(&[0.0, 1.0, 0.0], 1, &mut |_| true).unwrap();
//! assert_eq!(hits[0].key, TurnId::from_raw(2));
//! assert!((hits[0].score - 0.8).abs() < 1e-6);
//! ```
#![warn(missing_docs)]

mod distance;
mod exact;
mod hnsw;
mod index;
mod key;
mod prefetch;
mod row_map;
mod select;
mod sketch;
#[cfg(test)]
mod test_vectors;
mod windowed;

pub use crate::{
    distance::{dot, normalize},
    exact::ExactIndex,
    hnsw::{
        ChecksumReader, HnswIndex, HnswParams, INDEX_FILE_MAGIC, INDEX_FILE_VERSION,
        IndexFileError, IndexFileHeader, IndexFileMeta, IndexFileState, SearchTrace,
        index_file_name, index_file_prefix, index_file_state, read_index_header,
        remove_abandoned_temporaries, remove_index_file, write_index_file,
    },
    index::{
        IndexKind, PgvectorHnsw, PooledHits, VectorError, VectorHit, VectorIndex, VectorIndexRead,
    },
    key::IndexKey,
    row_map::{RowMap, VectorRow},
    sketch::SketchParams,
    windowed::{WindowKey, WindowedIndex},
};
