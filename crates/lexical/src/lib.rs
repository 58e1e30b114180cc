//! Analyzer and BM25 inverted index.
