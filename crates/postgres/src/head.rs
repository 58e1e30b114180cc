//! The head recorded in `ledger_meta` (last position and chain hash).

use evicortex_ledger::{LedgerPosition, storage::Head};
use postgres::GenericClient;

use crate::schema::meta_value;

/// The head as `ledger_meta` records it; `Ok(Err(_))` says what is malformed.
pub(crate) fn read_head(
    client: &mut impl GenericClient,
) -> Result<Result<Head, String>, postgres::Error> {
    let seq = meta_value(client, "head_seq")?;
    let chain = meta_value(client, "chain_head")?;
    Ok(Head::parse(seq.as_deref(), chain.as_deref()))
}

/// Records `head` in `ledger_meta`, in the transaction that wrote the records.
pub(crate) fn write_head(
    client: &mut impl GenericClient,
    head: Head,
) -> Result<(), postgres::Error> {
    let seq = head.last.map_or(0, LedgerPosition::raw).to_string();
    client.execute("UPDATE ledger_meta SET value = $1 WHERE key = 'head_seq'", &[&seq])?;
    client.execute(
        "UPDATE ledger_meta SET value = $1 WHERE key = 'chain_head'",
        &[&head.chain.to_hex()],
    )?;
    Ok(())
}
