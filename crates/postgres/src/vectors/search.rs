//! Dense candidates: the `n` admitted vectors most similar to a query, by the HNSW index or an
//! exact scan, chosen so that the as-of filter is applied inside the search under pgvector 0.6.
//!
//! pgvector 0.6's HNSW scan collects `hnsw.ef_search` candidates and only then applies the
//! WHERE clause, so a filter admitting few rows leaves fewer than `n`. Counting the filter's
//! rows on the btree over the event time is cheap, so the path is chosen up front: an exact scan
//! when the filter admits under [`EXACT_SHARE_DIVISOR`]-th of the partition or no more rows
//! than the HNSW scan would collect anyway, else the HNSW scan, and the exact scan after it
//! when it comes back short. Both paths see one snapshot (one repeatable-read transaction).

use evicortex_core::{Namespace, TurnId};
use evicortex_vector::VectorHit;
use postgres::{IsolationLevel, Transaction, types::ToSql};

use super::{
    PgVectors, VectorStoreError, literal,
    schema::{self, Registered},
    store::MAX_EF_SEARCH,
};

/// A filter admitting under 1 / this of a partition's rows takes the exact scan.
pub(crate) const EXACT_SHARE_DIVISOR: u64 = 8;

/// The least `hnsw.ef_search` a search uses: a narrower beam loses recall on clustered
/// sentence embeddings.
const MIN_EF_SEARCH: u32 = 64;

/// Candidates and the path that found them.
#[derive(Clone, Debug, PartialEq)]
pub struct PgSearch {
    /// The admitted vectors most similar to the query: cosine similarity, descending, ties by
    /// ascending record.
    pub hits: Vec<VectorHit<TurnId>>,
    /// Which index served the search (a compiled context records it).
    pub served_by: ServedBy,
}

/// Which path answered a search.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ServedBy {
    /// The partition's HNSW index.
    Hnsw {
        /// The index's `m`.
        m: u32,
        /// The index's `ef_construction`.
        ef_construction: u32,
        /// The `hnsw.ef_search` the scan ran with.
        ef_search: u32,
    },
    /// An exact scan over every admitted vector (top `n` by cosine, as the embedded exact
    /// index).
    Exact(ExactReason),
}

/// Why a search was answered by the exact scan.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ExactReason {
    /// The as-of filter admits under an eighth of the partition's rows, or no more than the
    /// HNSW scan would collect.
    SelectiveFilter {
        /// Rows the filter admits.
        admitted: u64,
        /// Rows in the namespace's partition.
        rows: u64,
    },
    /// The HNSW scan returned fewer than `n` admitted rows.
    HnswShort {
        /// How many it returned.
        returned: usize,
    },
    /// More candidates asked for than `hnsw.ef_search` can be set to.
    BeyondEfSearch,
    /// The namespace has no vectors of this encoder.
    NoVectors,
}

impl PgVectors {
    /// The `n` vectors of `identity`'s encoder in `namespace` most similar to `query` whose
    /// event time is at or before `as_of_utc_micros` (inclusive, as the compiler's as-of), with
    /// the path that served them. Scores are cosine similarities (1 − pgvector's cosine
    /// distance), comparable to the embedded exact index's.
    pub fn search(
        &self,
        identity: &str,
        namespace: &Namespace,
        query: &[f32],
        n: usize,
        as_of_utc_micros: Option<i64>,
    ) -> Result<PgSearch, VectorStoreError> {
        let encoder = self.encoder(identity)?;
        if query.len() != encoder.dim {
            return Err(VectorStoreError::Dimension {
                identity: identity.to_owned(),
                namespace: namespace.clone(),
                record: None,
                got: query.len(),
                expected: encoder.dim,
            });
        }
        let unit = literal::unit(query).map_err(|reason| VectorStoreError::InvalidVector {
            namespace: namespace.clone(),
            record: None,
            reason,
        })?;
        let search = Search {
            query: literal::text(&unit),
            limit: i64::try_from(n).unwrap_or(i64::MAX),
            as_of: as_of_utc_micros,
        };
        let mut client = self.client();
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.db("starting the search"))?;
        let result = self.search_in(&mut tx, &encoder, namespace, &search, n)?;
        tx.commit().map_err(self.db("ending the search"))?;
        Ok(result)
    }

    fn search_in(
        &self,
        tx: &mut Transaction<'_>,
        encoder: &Registered,
        namespace: &Namespace,
        search: &Search,
        n: usize,
    ) -> Result<PgSearch, VectorStoreError> {
        let Some(partition) = schema::find_partition(tx, encoder, namespace.as_str())
            .map_err(self.db("finding the namespace's partition"))?
        else {
            return Ok(PgSearch {
                hits: Vec::new(),
                served_by: ServedBy::Exact(ExactReason::NoVectors),
            });
        };
        let Some(ef_search) = u32::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_EF_SEARCH)
            .map(|n| n.max(MIN_EF_SEARCH).max(self.ef_search()))
        else {
            let hits = self.exact(tx, &partition, search)?;
            return Ok(PgSearch { hits, served_by: ServedBy::Exact(ExactReason::BeyondEfSearch) });
        };
        if let Some(as_of) = search.as_of
            && let Some(reason) = self.selective(tx, &partition, as_of, ef_search)?
        {
            let hits = self.exact(tx, &partition, search)?;
            return Ok(PgSearch { hits, served_by: ServedBy::Exact(reason) });
        }
        let hits = self.hnsw(tx, &partition, search, ef_search)?;
        if hits.len() < n {
            let returned = hits.len();
            let hits = self.exact(tx, &partition, search)?;
            return Ok(PgSearch {
                hits,
                served_by: ServedBy::Exact(ExactReason::HnswShort { returned }),
            });
        }
        let hnsw = encoder.hnsw;
        Ok(PgSearch {
            hits,
            served_by: ServedBy::Hnsw {
                m: hnsw.m,
                ef_construction: hnsw.ef_construction,
                ef_search,
            },
        })
    }

    /// `Some` when the as-of filter admits so few rows that the exact scan should answer. The
    /// admitted rows are counted only up to the point that decides it, on the time btree.
    fn selective(
        &self,
        tx: &mut Transaction<'_>,
        partition: &str,
        as_of: i64,
        ef_search: u32,
    ) -> Result<Option<ExactReason>, VectorStoreError> {
        let rows = schema::counted_rows(tx, partition)
            .map_err(self.db("reading the namespace's vector count"))?;
        // Exact iff admitted * DIVISOR < rows or admitted <= ef_search, i.e. iff fewer than
        // this many rows are admitted.
        let decisive = rows.div_ceil(EXACT_SHARE_DIVISOR).max(u64::from(ef_search) + 1);
        let admitted: i64 = tx
            .query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM {partition} \
                     WHERE event_utc_us <= $1 LIMIT $2) AS admitted"
                ),
                &[&as_of, &i64::try_from(decisive).unwrap_or(i64::MAX)],
            )
            .map_err(self.db("counting the vectors the as-of filter admits"))?
            .get(0);
        let admitted = u64::try_from(admitted).unwrap_or(0);
        Ok((admitted < decisive).then_some(ExactReason::SelectiveFilter { admitted, rows }))
    }

    /// The HNSW scan. The planner is steered off the sequential scan and sorts, so only the
    /// HNSW index can give the order; pgvector applies the as-of filter to its candidates.
    fn hnsw(
        &self,
        tx: &mut Transaction<'_>,
        partition: &str,
        search: &Search,
        ef_search: u32,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorStoreError> {
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.ef_search = {ef_search}; SET LOCAL enable_seqscan = off; \
             SET LOCAL enable_sort = off; SET LOCAL enable_indexscan = on;"
        ))
        .map_err(self.db("setting up the HNSW scan"))?;
        let (filter, params) = search.filter_and_params();
        let sql = format!(
            "SELECT number, (1 - (embedding <=> $1::text::vector))::real FROM {partition} \
             {filter} ORDER BY embedding <=> $1::text::vector LIMIT $2"
        );
        let mut hits = self.rows(tx, &sql, &params, "searching the HNSW index")?;
        // The index orders by pgvector's double distance; equal scores are ordered by record.
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
        Ok(hits)
    }

    /// The exact scan: every admitted row scored (the as-of filter through the time btree), top
    /// `n` by score then record. Index scans are turned off so the HNSW index cannot answer.
    fn exact(
        &self,
        tx: &mut Transaction<'_>,
        partition: &str,
        search: &Search,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorStoreError> {
        tx.batch_execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_sort = on;")
            .map_err(self.db("setting up the exact scan"))?;
        let (filter, params) = search.filter_and_params();
        let sql = format!(
            "SELECT number, (1 - (embedding <=> $1::text::vector))::real AS score \
             FROM {partition} {filter} ORDER BY score DESC, number LIMIT $2"
        );
        self.rows(tx, &sql, &params, "scanning the admitted vectors")
    }

    fn rows(
        &self,
        tx: &mut Transaction<'_>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        op: &'static str,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorStoreError> {
        let rows = tx.query(sql, params).map_err(self.db(op))?;
        Ok(rows
            .iter()
            .map(|row| VectorHit {
                key: TurnId::from_raw(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)),
                score: row.get(1),
            })
            .collect())
    }
}

/// One search's parameters, as sent.
struct Search {
    query: String,
    limit: i64,
    as_of: Option<i64>,
}

impl Search {
    /// The WHERE clause and the parameters `$1` (query), `$2` (limit) and `$3` (as-of).
    fn filter_and_params(&self) -> (&'static str, Vec<&(dyn ToSql + Sync)>) {
        match &self.as_of {
            Some(as_of) => ("WHERE event_utc_us <= $3", vec![&self.query, &self.limit, as_of]),
            None => ("", vec![&self.query, &self.limit]),
        }
    }
}
