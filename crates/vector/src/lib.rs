//! VectorIndex traits and the exact cosine index.
