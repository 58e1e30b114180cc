//! Appending: the ledger crate's append (`evicortex_ledger::storage::append_group_in`) in one
//! transaction of the server, serialised with every other writer of the database.

use evicortex_core::Turn;
use evicortex_ledger::{
    AppendError, AppendReceipt,
    storage::{append_group_in, canonical_metas, check_append_in},
};

use crate::{
    PgLedger,
    table::{LOCK_RECORDS, PgTable},
};

/// Appends each batch, in order, in ONE transaction (group commit: one lock, one head write,
/// one commit and its flush for all of them; durable as the server's `synchronous_commit`
/// makes commits). On a read replica every batch is refused, none sent.
pub(crate) fn append_group(
    ledger: &PgLedger,
    batches: &[&[Turn]],
) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
    if ledger.is_replica() {
        let refused = || Err(AppendError::ReadOnlyReplica { server: ledger.url().to_owned() });
        return Ok(batches.iter().map(|_| refused()).collect());
    }
    let metas = batches.iter().map(|turns| canonical_metas::<PgTable>(turns)).collect();
    let mut client = ledger.client();
    let mut tx = client.transaction().map_err(ledger.db("starting an append"))?;
    tx.batch_execute(LOCK_RECORDS).map_err(ledger.db("locking the records table"))?;
    let results = append_group_in(&mut PgTable::new(&mut tx, ledger), batches, metas)?;
    tx.commit().map_err(ledger.db("committing an append"))?;
    Ok(results)
}

/// Checks `turns` as an append would against one snapshot. On a read replica a batch that
/// would write (any new turn) is [`AppendError::ReadOnlyReplica`], as its append would be; one
/// whose turns are all present is answered from what the replica has replayed.
pub(crate) fn check_append(ledger: &PgLedger, turns: &[Turn]) -> Result<usize, AppendError> {
    let mut client = ledger.client();
    let mut tx = crate::client_pool::read_snapshot(&mut client)
        .map_err(ledger.db("starting an append check"))?;
    let new = check_append_in(&mut PgTable::new(&mut tx, ledger), turns)?;
    tx.commit().map_err(ledger.db("ending an append check"))?;
    if new > 0 && ledger.is_replica() {
        return Err(AppendError::ReadOnlyReplica { server: ledger.url().to_owned() });
    }
    Ok(new)
}
