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
        let mut tx = crate::client_cell::read_snapshot(&mut client)
            .map_err(self.db("starting an append check"))?;
        let plans = self.plan(&mut tx, turns, &metas)?;
        tx.commit().map_err(self.db("ending an append check"))?;
        let new = plans.iter().filter(|p| matches!(p, Plan::New)).count();
        if new > 0 && self.is_replica() {
            return Err(AppendError::ReadOnlyReplica { url: self.url().to_owned() });
        }
        Ok(new)
    }

    /// Appends each batch as [`PgLedger::append`] does, in order, each refused or committed on
    /// its own. Unlike the embedded ledger's group commit this is one transaction per batch
    /// (this slice has no group commit), so the outer `Err` is never returned: a server failure
    /// is the failing batch's own error, and the batches after it are still tried. On a read
    /// replica every batch is refused, none sent.
    pub fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        Ok(batches.iter().map(|turns| self.append(turns)).collect())
    }
}
