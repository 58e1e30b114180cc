//! Dense candidates on PostgreSQL with pgvector: one vector per (encoder, namespace, record
//! number), searched by cosine similarity with the namespace and as-of filters applied inside
//! the search.
//!
//! Layout (`schema.rs`): every encoder identity gets a table of its own, `vectors_e<id>`, whose
//! `embedding` column has the encoder's dimension, so vectors of two encoders can never meet in
//! one search. That table is LIST-partitioned by namespace, one partition per namespace, and
//! every partition carries an HNSW index (`vector_cosine_ops`) and a btree on the event time.
//! A search reads one partition only, so the namespace filter is the partition itself. A
//! partition's HNSW index is built over its first rows once they are stored (a bulk build), and
//! rows stored later are linked into it as they arrive.
//!
//! pgvector 0.6 applies a WHERE clause after its HNSW scan has collected `hnsw.ef_search`
//! candidates, so a selective as-of filter could leave fewer than `n` rows. The search
//! therefore chooses its path (`search.rs`): the as-of filter's share of the partition is
//! counted on the btree, and a filter admitting under an eighth of it (or no more rows than the
//! HNSW scan would look at) is answered by an exact scan over the admitted rows; otherwise the
//! HNSW scan runs with `hnsw.ef_search` at least `max(64, n)`, and if it returns fewer than `n`
//! admitted rows the exact scan answers instead. Each result says which path served it
//! ([`ServedBy`]).
//!
//! Erasure ([`PgVectors::remove`]) deletes the record's rows of every encoder and rewrites each
//! partition that lost one (`VACUUM FULL`, after the transactions older than the delete have
//! ended; a rewrite still owed is recorded and retried, `scrub.rs`). ANALYZE samples no vector
//! (`embedding` has statistics target 0), so none outlives its row in `pg_statistic`.
//!
//! Vectors are stored scaled to unit length and sent as text literals in the shortest decimal
//! form that reads back as the same `f32`, so no pgvector client crate is needed and nothing is
//! rounded on the way.
//!
//! The `vector` extension must already be installed in the database (`CREATE EXTENSION vector`
//! needs a privileged role); [`PgVectors::connect`] refuses a database without it, or with a
//! version older than 0.5 (no HNSW).

mod error;
mod literal;
mod mirror;
mod schema;
mod scrub;
mod search;
mod store;

pub use self::{
    error::VectorStoreError,
    schema::{EncoderSpace, HnswBuild},
    search::{ExactReason, PgSearch, ServedBy},
    store::{PgVectors, StoredVector},
};
