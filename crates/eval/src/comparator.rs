//! The comparator: a strong, honest baseline that EviCortex must beat.

pub mod hybrid_chunk_rag;
