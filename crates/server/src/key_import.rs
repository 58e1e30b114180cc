//! Keys kept by an earlier version in a PostgreSQL store's derived directory (`keys.sqlite`,
//! one file per machine) are moved into the database's key table, where every server finds
//! them: each row as it is (hash, id, scope, creation time), then the file is removed, so that
//! a key revoked in the database is never brought back from it.

use std::path::Path;

use evicortex::front_end::StoredKey;
use rusqlite::{Connection, OpenFlags};

use crate::{KEY_STORE_FILE, KeyStore, KeyStoreError};

/// Moves the keys of `dir/keys.sqlite`, if there is one, into `keys` (a database's key
/// table), then removes the file and its journal. A crash between the two moves the same
/// rows again at the next open (a stored hash is kept as it is).
pub(crate) fn move_key_file_into(dir: &Path, keys: &KeyStore) -> Result<(), KeyStoreError> {
    let path = dir.join(KEY_STORE_FILE);
    if !path.exists() {
        return Ok(());
    }
    let sql = |source| KeyStoreError::Sqlite { path: path.clone(), source };
    let conn =
        Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(sql)?;
    let rows = read_rows(&conn).map_err(sql)?;
    let mut moved = 0;
    for row in rows {
        let key = row.map_err(|detail| KeyStoreError::Corrupted {
            path: path.clone(),
            key_id: detail.0,
            detail: detail.1,
        })?;
        moved += usize::from(keys.insert(&key)?);
    }
    drop(conn);
    for name in [
        KEY_STORE_FILE.to_owned(),
        format!("{KEY_STORE_FILE}-wal"),
        format!("{KEY_STORE_FILE}-shm"),
    ] {
        match fs_err::remove_file(dir.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(KeyStoreError::CreateDir { path: path.clone(), source: e });
            }
            _ => {}
        }
    }
    tracing::warn!(
        "moved {moved} API key(s) from {} into the database {}, where every server of the store \
         finds them; the file was removed",
        path.display(),
        keys.path().display()
    );
    Ok(())
}

type Row = Result<StoredKey, (String, String)>;

fn read_rows(conn: &Connection) -> Result<Vec<Row>, rusqlite::Error> {
    let mut stmt =
        conn.prepare("SELECT key_hash, key_id, namespace, admin, created_at FROM api_keys")?;
    let rows = stmt.query_map([], |row| {
        let hash: Vec<u8> = row.get(0)?;
        let key_id: String = row.get(1)?;
        let admin: i64 = row.get(3)?;
        let namespace: Option<String> = row.get(2)?;
        let created_at: String = row.get(4)?;
        Ok(match <[u8; 32]>::try_from(hash.as_slice()) {
            Ok(key_hash) if admin == 0 || admin == 1 => {
                Ok(StoredKey { key_hash, key_id, namespace, admin: admin == 1, created_at })
            }
            Ok(_) => Err((key_id, format!("admin flag {admin}"))),
            Err(_) => Err((key_id, format!("a hash of {} bytes", hash.len()))),
        })
    })?;
    rows.collect()
}
