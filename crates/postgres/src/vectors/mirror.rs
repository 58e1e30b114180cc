//! Vectors of a ledger kept in the same database: a store on PostgreSQL keeps its turns' vectors
//! beside its records, so that the dense candidates of every process (and every replica) come
//! from one HNSW index. Writes here are tied to the ledger: a vector is stored only for a live
//! turn, and an erasure's purge can never be overtaken by a vector of the erased turn.

use std::collections::HashSet;

use evicortex_core::{Namespace, TurnId};

use crate::schema::KIND_TURN;

use super::{
    PgVectors, StoredVector, VectorStoreError, schema, scrub,
    store::{PreparedRow, check_extension, connect_client, database, prepare},
};

/// Rows sent per statement: a few megabytes of text for 384-dimensional vectors.
const ROWS_PER_STATEMENT: usize = 500;

impl PgVectors {
    /// The vector store of the ledger in the database at `url`. A database without the `vector`
    /// extension gets it (`CREATE EXTENSION vector`), which needs a role allowed to create it;
    /// when that fails the error says so and names the statement to run.
    pub fn connect_for_ledger(url: &str) -> Result<PgVectors, VectorStoreError> {
        let (mut client, shown) = connect_client(url)?;
        let installed = client
            .query_opt("SELECT 1 FROM pg_extension WHERE extname = 'vector'", &[])
            .map_err(database(&shown, "looking for the vector extension"))?
            .is_some();
        if !installed && let Err(e) = client.batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
        {
            return Err(VectorStoreError::Extension {
                url: shown,
                found: format!("no vector extension, and creating it failed ({e})"),
            });
        }
        PgVectors::open(client, url, &shown)
    }

    /// The vector store of the ledger at `url` when the database has one (an erasure through a
    /// memory without an encoder must still purge the vectors other processes stored), else
    /// `None`. Nothing is created.
    pub fn connect_existing(url: &str) -> Result<Option<PgVectors>, VectorStoreError> {
        let (mut client, shown) = connect_client(url)?;
        let exists: bool = client
            .query_one("SELECT to_regclass('vector_encoders') IS NOT NULL", &[])
            .map_err(database(&shown, "looking for the vector store"))?
            .get(0);
        if !exists {
            return Ok(None);
        }
        check_extension(&mut client, &shown)?;
        PgVectors::open(client, url, &shown).map(Some)
    }

    /// The (record, segment) pairs of `identity`'s vectors stored for `namespace`.
    pub fn stored_keys(
        &self,
        identity: &str,
        namespace: &Namespace,
    ) -> Result<HashSet<(TurnId, u32)>, VectorStoreError> {
        let encoder = self.encoder(identity)?;
        let mut client = self.client();
        let Some(partition) = schema::find_partition(&mut *client, &encoder, namespace.as_str())
            .map_err(self.db("finding the namespace's partition"))?
        else {
            return Ok(HashSet::new());
        };
        let rows = client
            .query(&format!("SELECT number, segment FROM {partition}"), &[])
            .map_err(self.db("listing the stored vectors"))?;
        Ok(rows
            .iter()
            .map(|row| {
                let number: i64 = row.get(0);
                let segment: i32 = row.get(1);
                (
                    TurnId::from_raw(u64::try_from(number).unwrap_or(0)),
                    u32::try_from(segment).unwrap_or(0),
                )
            })
            .collect())
    }

    /// Stores `rows` for the ledger in this database, skipping a row already stored (another
    /// process may have stored the same vector: an encoder's vector of a text is one value) and
    /// a row whose record is not a live turn of `namespace` (erased meanwhile, or unknown).
    /// Returns the rows stored.
    ///
    /// The ledger's records table is locked in SHARE mode for the transaction, which an
    /// erasure's EXCLUSIVE lock conflicts with: a vector either commits before the erasure
    /// (whose purge then removes it) or sees the erasure and is not stored.
    pub fn mirror(
        &self,
        identity: &str,
        namespace: &Namespace,
        rows: &[StoredVector<'_>],
    ) -> Result<u64, VectorStoreError> {
        self.check_writable()?;
        if rows.is_empty() {
            return Ok(0);
        }
        let encoder = self.encoder(identity)?;
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting the mirror"))?;
        let partition = schema::ensure_partition(&mut tx, &encoder, namespace.as_str())
            .map_err(self.db("creating the namespace's partition"))?;
        tx.batch_execute("LOCK TABLE records IN SHARE MODE")
            .map_err(self.db("locking the ledger's records against erasure"))?;
        let statement = tx
            .prepare(&format!(
                "INSERT INTO {partition} (namespace, number, segment, event_utc_us, embedding) \
                 SELECT $1, r.number, t.segment, t.event_utc_us, t.embedding::vector \
                 FROM unnest($2::bigint[], $3::integer[], $4::bigint[], $5::text[]) \
                      AS t(number, segment, event_utc_us, embedding) \
                 JOIN records r ON r.namespace = $1 AND r.number = t.number \
                      AND r.kind = {KIND_TURN} AND r.erased_by IS NULL \
                 ON CONFLICT DO NOTHING"
            ))
            .map_err(self.db("preparing the mirror"))?;
        let mut stored = 0;
        // Each statement's rows are checked and written out as it is sent, not all at once: a
        // namespace of a million vectors as text is gigabytes. A refused row rolls back the
        // whole transaction, so the mirror stays all or none.
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let chunk = prepare(&encoder, identity, namespace, chunk)?;
            let column = |f: fn(&PreparedRow) -> i64| chunk.iter().map(f).collect::<Vec<_>>();
            let numbers = column(|r| r.number);
            let times = column(|r| r.time);
            let segments: Vec<i32> = chunk.iter().map(|r| r.segment).collect();
            let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
            stored += tx
                .execute(&statement, &[&namespace.as_str(), &numbers, &segments, &times, &texts])
                .map_err(self.db("mirroring vectors"))?;
        }
        schema::add_rows(&mut tx, &partition, stored as i64)
            .map_err(self.db("counting the stored rows"))?;
        schema::ensure_hnsw_index(&mut tx, &encoder, &partition)
            .map_err(self.db("building the partition's HNSW index"))?;
        tx.commit().map_err(self.db("committing the mirror"))?;
        Ok(stored)
    }

    /// Removes every encoder's vectors of turns the ledger in this database has erased, and
    /// rewrites the partitions that lost one: an erasure interrupted between the ledger and its
    /// purge leaves no vector behind once this has run. Returns the rows removed.
    pub fn remove_erased(&self) -> Result<u64, VectorStoreError> {
        self.check_writable()?;
        let removed = {
            let mut client = self.client();
            let mut tx = client.transaction().map_err(self.db("starting the reconcile"))?;
            let partitions: Vec<(i32, i32)> = tx
                .query("SELECT encoder, id FROM vector_partitions ORDER BY encoder, id", &[])
                .map_err(self.db("listing the partitions"))?
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect();
            let mut removed = 0;
            for (encoder, id) in partitions {
                let partition = schema::partition_name_of(encoder, id);
                let n = tx
                    .execute(
                        &format!(
                            "DELETE FROM {partition} v USING records r \
                             WHERE r.namespace = v.namespace AND r.number = v.number \
                               AND r.kind = {KIND_TURN} AND r.erased_by IS NOT NULL"
                        ),
                        &[],
                    )
                    .map_err(self.db("deleting vectors of erased turns"))?;
                removed += n;
                scrub::owe_rewrite(&mut tx, &partition, n)
                    .map_err(self.db("recording the removed rows and the rewrite owed"))?;
            }
            tx.commit().map_err(self.db("committing the reconcile"))?;
            removed
        };
        self.scrub()?;
        Ok(removed)
    }
}
