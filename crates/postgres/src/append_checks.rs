//! The embedded ledger's append entry points that the facade calls besides `append`: the dry
//! run over a whole input, and several batches handed over together.

use evicortex_core::Turn;
use evicortex_ledger::AppendReceipt;

use crate::{
    AppendError, PgLedger,
    append::{Plan, validated_metas},
};

impl PgLedger {
    /// Checks `turns` exactly as [`PgLedger::append`] would (validity, conflicts within the batch
    /// and with stored turns, erased turns, the stored turns it would answer as present) against
    /// one snapshot, writing nothing. Returns how many turns would be new. On a read replica a
    /// batch that would write (any new turn) is [`AppendError::ReadOnlyReplica`], as its append
    /// would be; one whose turns are all present is answered from what the replica has replayed.
    pub fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        let metas = validated_metas(turns)?;
        let mut client = self.client();
        let mut tx = crate::client_pool::read_snapshot(&mut client)
            .map_err(self.db("starting an append check"))?;
        let plans = self.plan(&mut tx, turns, &metas)?;
        tx.commit().map_err(self.db("ending an append check"))?;
        let new = plans.iter().filter(|p| matches!(p, Plan::New)).count();
        if new > 0 && self.is_replica() {
            return Err(AppendError::ReadOnlyReplica { url: self.url().to_owned() });
        }
        Ok(new)
    }

    /// Appends each batch as [`PgLedger::append`] would, in order, in ONE transaction (group
    /// commit: one lock, one head write, one commit and its flush for all of them), each batch
    /// under a savepoint of its own: a refused batch is rolled back alone and gets its own
    /// error, the others are committed together. The outer `Err` is a failure of the group
    /// itself (the lock, the head, the commit): then none of the batches is stored. On a read
    /// replica every batch is refused, none sent.
    pub fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        if self.is_replica() {
            let refused = || Err(AppendError::ReadOnlyReplica { url: self.url().to_owned() });
            return Ok(batches.iter().map(|_| refused()).collect());
        }
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting a group of appends"))?;
        let mut head = self.lock_and_read_head(&mut tx)?;
        let mut results = Vec::with_capacity(batches.len());
        for turns in batches {
            let metas = match validated_metas(turns) {
                Ok(metas) => metas,
                Err(refused) => {
                    results.push(Err(refused));
                    continue;
                }
            };
            let before = head;
            let mut savepoint =
                tx.transaction().map_err(self.db("starting a batch's savepoint"))?;
            match self.append_in(&mut savepoint, &mut head, turns, &metas) {
                Ok(receipt) => {
                    savepoint.commit().map_err(self.db("releasing a batch's savepoint"))?;
                    results.push(Ok(receipt));
                }
                Err(refused) => {
                    savepoint.rollback().map_err(self.db("rolling a batch back"))?;
                    head = before;
                    results.push(Err(refused));
                }
            }
        }
        crate::head::write_head(&mut tx, head).map_err(self.db("recording the head"))?;
        tx.commit().map_err(self.db("committing a group of appends"))?;
        Ok(results)
    }
}
