//! After a removal, the partitions that lost vectors are rewritten so the removed bytes are left
//! in no table or index file. A rewrite still owed (interrupted, or blocked by an old snapshot)
//! is recorded in `vector_scrub_pending` and done by the next removal or connect.

use std::time::{Duration, Instant};

use postgres::{Client, Transaction};

use super::{PgVectors, VectorStoreError, schema};

/// How long a scrub waits for sessions holding snapshots from before the removal (as the
/// ledger's scrub).
const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

/// Records in `tx`, which deleted `removed` rows of `partition`, what a removal owes: the
/// partition's row count moved down and its rewrite marked as owed. Both commit with the delete,
/// so a crash before the rewrite leaves the mark to retry. Nothing when no row was removed.
pub(crate) fn owe_rewrite(
    tx: &mut Transaction<'_>,
    partition: &str,
    removed: u64,
) -> Result<(), postgres::Error> {
    if removed == 0 {
        return Ok(());
    }
    schema::add_rows(tx, partition, -(removed as i64))?;
    tx.execute(
        "INSERT INTO vector_scrub_pending (partition, erase_xid) \
         VALUES ($1, pg_current_xact_id()::text) \
         ON CONFLICT (partition) DO UPDATE SET erase_xid = EXCLUDED.erase_xid",
        &[&partition],
    )?;
    Ok(())
}

impl PgVectors {
    /// Rewrites every partition that lost vectors since its last rewrite (`VACUUM FULL`, which
    /// also rebuilds its HNSW and time indexes; the old files are truncated at once). It first
    /// waits until no other session of this database holds a snapshot from before the removal,
    /// since the rewrite would have to keep the removed rows for such a snapshot.
    pub fn scrub(&self) -> Result<(), VectorStoreError> {
        let mut client = self.client();
        let pending: Vec<(String, String)> = client
            .query("SELECT partition, erase_xid FROM vector_scrub_pending ORDER BY partition", &[])
            .map_err(self.db("reading the pending scrubs"))?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        for (partition, erase_xid) in pending {
            if !schema::is_partition_name(&partition) {
                return Err(VectorStoreError::Inconsistent {
                    url: self.url().to_owned(),
                    detail: format!("vector_scrub_pending names {partition:?}, not a partition"),
                });
            }
            self.wait_for_old_snapshots(&mut client, &erase_xid, &partition)?;
            // One statement per call: VACUUM cannot run inside a transaction block.
            client
                .batch_execute(&format!("VACUUM FULL {partition}"))
                .map_err(self.db("rewriting a partition that lost vectors"))?;
            client
                .execute(
                    "DELETE FROM vector_scrub_pending WHERE partition = $1 AND erase_xid = $2",
                    &[&partition, &erase_xid],
                )
                .map_err(self.db("clearing a pending scrub"))?;
        }
        Ok(())
    }

    /// Waits until every transaction that began before the removal committed has ended,
    /// on the whole server (a transaction of another database still bounds the snapshot the
    /// rewrite itself takes), and no other session of this database holds a snapshot from
    /// before it.
    fn wait_for_old_snapshots(
        &self,
        client: &mut Client,
        erase_xid: &str,
        partition: &str,
    ) -> Result<(), VectorStoreError> {
        let started = Instant::now();
        loop {
            let row = client
                .query_one(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot()) <= $1::text::xid8, \
                            array(SELECT pid FROM pg_stat_activity \
                                  WHERE datname = current_database() \
                                    AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL \
                                    AND age(backend_xmin) >= age(xid($1::text::xid8)))",
                    &[&erase_xid],
                )
                .map_err(self.db("looking for transactions older than the removal"))?;
            let (running, pids): (bool, Vec<i32>) = (row.get(0), row.get(1));
            if !running && pids.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= SNAPSHOT_WAIT {
                let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
                return Err(VectorStoreError::ScrubIncomplete {
                    partition: partition.to_owned(),
                    detail: format!(
                        "after {}s, {}",
                        SNAPSHOT_WAIT.as_secs(),
                        if pids.is_empty() {
                            "transactions older than the removal still run on the server".to_owned()
                        } else {
                            format!(
                                "sessions {} of this database hold snapshots from before the \
                                 removal",
                                pids.join(", ")
                            )
                        }
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
