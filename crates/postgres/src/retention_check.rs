//! The server settings under which an erased text would outlive its erasure in some file.

use postgres::GenericClient;

/// Each setting or object of the server that keeps bytes an erasure must remove, described with
/// what to change; empty when the scrub can remove them. Write-ahead log segments are kept or
/// renamed for reuse (`wal_recycle`, whose recycled segments keep their old contents),
/// kept for standbys (`wal_keep_size`, replication slots) or copied elsewhere (archiving);
/// statement logging with parameters writes every appended text to the server log.
pub(crate) fn retained_bytes(
    client: &mut impl GenericClient,
) -> Result<Vec<String>, postgres::Error> {
    let row = client.query_one(
        "SELECT current_setting('wal_recycle'), \
                (SELECT setting FROM pg_settings WHERE name = 'wal_keep_size'), \
                current_setting('archive_mode'), \
                (SELECT count(*) FROM pg_replication_slots WHERE restart_lsn IS NOT NULL), \
                current_setting('log_statement'), \
                current_setting('log_min_duration_statement'), \
                current_setting('log_parameter_max_length'), \
                current_setting('log_parameter_max_length_on_error')",
        &[],
    )?;
    let setting = |i: usize| -> String { row.get(i) };
    let mut problems = Vec::new();
    if setting(0) != "off" {
        problems.push(
            "wal_recycle is on: old write-ahead log segments are renamed for reuse with their \
             contents (set wal_recycle = off)"
                .to_owned(),
        );
    }
    if setting(1) != "0" {
        problems.push(format!(
            "wal_keep_size is {} MB: old write-ahead log segments are kept (set wal_keep_size = 0)",
            setting(1)
        ));
    }
    if setting(2) != "off" {
        problems.push(format!(
            "archive_mode is {}: write-ahead log segments are copied to an archive this ledger \
             cannot scrub (set archive_mode = off)",
            setting(2)
        ));
    }
    let slots: i64 = row.get(3);
    if slots > 0 {
        problems.push(format!(
            "{slots} replication slot(s) hold old write-ahead log segments (drop them; a standby \
             keeps its own copy of every text)"
        ));
    }
    let logs_parameters = setting(6) != "0";
    if logs_parameters && matches!(setting(4).as_str(), "mod" | "all") {
        problems.push(format!(
            "log_statement is {} with log_parameter_max_length {}: appended texts are written \
             to the server log (set log_parameter_max_length = 0 or log_statement = none)",
            setting(4),
            setting(6)
        ));
    }
    if logs_parameters && setting(5) != "-1" {
        problems.push(format!(
            "log_min_duration_statement is {} with log_parameter_max_length {}: appended texts \
             may be written to the server log (set log_parameter_max_length = 0)",
            setting(5),
            setting(6)
        ));
    }
    if setting(7) != "0" {
        problems.push(format!(
            "log_parameter_max_length_on_error is {}: a failed append writes its texts to the \
             server log (set it to 0)",
            setting(7)
        ));
    }
    Ok(problems)
}
