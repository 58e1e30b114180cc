//! The ledger handle: one serialised writer connection and a pool of reader connections.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::{
    ChainHash, FORMAT_VERSION, OpenError, StorageError, private_files,
    store::{self, APPLICATION_ID, sql_err},
};

/// How a ledger is opened.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the file if absent; refuse a store that fails the open-time integrity check.
    ReadWrite,
    /// Inspect an existing store without writing: the open-time check is recorded (see
    /// [`crate::EvidenceLedger::open_problem`]) rather than refused, so `verify` can name what
    /// is wrong.
    Inspect,
}

/// An open ledger. `Send + Sync`: share it behind an `Arc`; writes are serialised on one
/// connection, reads use pooled connections of their own and never wait for a writer (WAL).
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    mode: OpenMode,
    writer: Option<Mutex<Connection>>,
    readers: Mutex<Vec<Connection>>,
    pub(crate) open_problem: Option<String>,
    /// Set by a write that failed with an I/O error (a failed fsync or write): whether it
    /// reached the disk is unknown, so no later write on this handle may act as if it did not
    /// happen. Cleared only by opening the ledger again.
    poisoned: Mutex<Option<String>>,
    /// Erasures committed through this handle, and how many of them the last scrub covered.
    pub(crate) scrubs: crate::erase::ScrubQueue,
}

/// Idle reader connections kept for reuse.
const MAX_IDLE_READERS: usize = 8;

impl Ledger {
    /// Opens (creating if absent) the ledger file at `path` for reading and writing. Refuses a
    /// file that is not a ledger (leaving it untouched), a ledger of another format version, and
    /// one whose recorded chain head does not match its last record. The ledger file and its
    /// companions are made readable by their owner only (0600).
    pub fn open(path: &Path) -> Result<Ledger, OpenError> {
        Ledger::open_with(path, OpenMode::ReadWrite)
    }

    /// Opens the ledger at `path` in `mode`.
    pub fn open_with(path: &Path, mode: OpenMode) -> Result<Ledger, OpenError> {
        let exists = path.exists();
        if mode == OpenMode::Inspect && !exists {
            return Err(OpenError::NotFound { path: path.to_owned() });
        }
        if mode == OpenMode::ReadWrite && !exists {
            create_initialised(path)?;
        }
        if mode == OpenMode::ReadWrite && exists {
            // SQLite would fall back to reading, or fail with "unable to open database file";
            // the operating system says why (a read-only file system, permissions).
            std::fs::OpenOptions::new().write(true).open(path).map_err(|source| {
                OpenError::Storage(StorageError::Io {
                    op: "opening for writing",
                    path: path.to_owned(),
                    source,
                })
            })?;
        }
        let first = open_connection(path, mode)?;
        // Nothing is written before the file is known to be a ledger of this format (or an
        // empty database to initialise): a refused open leaves the file exactly as it was.
        refuse_foreign(&first, path, mode)?;
        if mode == OpenMode::ReadWrite {
            set_wal(&first, path)?;
            initialise(&first, path)?;
        }
        let open_problem = check_open(&first, path)?;
        if let (OpenMode::ReadWrite, Some(detail)) = (mode, &open_problem) {
            return Err(OpenError::Corrupted { path: path.to_owned(), detail: detail.clone() });
        }
        if mode == OpenMode::ReadWrite {
            private_files::restrict_sqlite_files(path).map_err(|source| {
                OpenError::Storage(StorageError::Io {
                    op: "restricting to its owner",
                    path: path.to_owned(),
                    source,
                })
            })?;
        }
        let scrub_pending = match mode {
            OpenMode::ReadWrite => store::scrub_pending(&first).map_err(sql_err(path))?,
            OpenMode::Inspect => None,
        };
        let writer = match mode {
            OpenMode::ReadWrite => Some(Mutex::new(first)),
            OpenMode::Inspect => None,
        };
        let ledger = Ledger {
            path: path.to_owned(),
            mode,
            writer,
            readers: Mutex::new(Vec::new()),
            open_problem,
            poisoned: Mutex::new(None),
            scrubs: crate::erase::ScrubQueue::default(),
        };
        if let Some(redaction) = scrub_pending {
            // An erasure committed, then the process ended before its scrub did: the erased
            // bytes may still be in the main file or the WAL. Finish before anything else.
            ledger.scrub().map_err(|e| match e {
                crate::EraseError::Storage(s) => OpenError::Storage(s),
                other => OpenError::Storage(StorageError::Io {
                    op: "finishing the scrub of an interrupted erasure in",
                    path: path.to_owned(),
                    source: std::io::Error::other(format!(
                        "redaction record #{redaction}: {other}"
                    )),
                }),
            })?;
        }
        Ok(ledger)
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the ledger was opened.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// Runs `f` on a reader connection from the pool.
    pub(crate) fn with_reader<T, E: From<StorageError>>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut reader = self.reader()?;
        f(&mut reader)
    }

    /// A reader connection from the pool, returned to it when dropped.
    pub(crate) fn reader(&self) -> Result<PooledReader<'_>, StorageError> {
        let pooled = lock(&self.readers).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_connection(&self.path, OpenMode::Inspect).map_err(|e| match e {
                OpenError::Storage(s) => s,
                other => StorageError::Io {
                    op: "opening a reader on",
                    path: self.path.clone(),
                    source: std::io::Error::other(other.to_string()),
                },
            })?,
        };
        Ok(PooledReader { ledger: self, conn: Some(conn) })
    }

    /// Runs `f` on the writer connection, or returns `read_only` for an inspected ledger.
    /// After a write failed with an I/O error, refuses every later write (see
    /// [`StorageError::Poisoned`]).
    pub(crate) fn with_writer<T, E: WriteError>(
        &self,
        read_only: impl FnOnce(PathBuf) -> E,
        f: impl FnOnce(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(writer) = &self.writer else { return Err(read_only(self.path.clone())) };
        let mut conn = lock(writer);
        if let Some(cause) = lock(&self.poisoned).clone() {
            return Err(E::from(StorageError::Poisoned { path: self.path.clone(), cause }));
        }
        let result = f(&mut conn);
        if let Err(e) = &result
            && e.storage().is_some_and(StorageError::is_io_failure)
        {
            *lock(&self.poisoned) = Some(e.to_string());
        }
        result
    }

    /// Why this handle refuses writes, if an earlier write failed with an I/O error.
    pub fn poisoned(&self) -> Option<String> {
        lock(&self.poisoned).clone()
    }
}

/// An error of a write operation, which may carry a storage failure.
pub(crate) trait WriteError: From<StorageError> + std::fmt::Display {
    fn storage(&self) -> Option<&StorageError>;
}

impl WriteError for crate::AppendError {
    fn storage(&self) -> Option<&StorageError> {
        match self {
            crate::AppendError::Storage(s) => Some(s),
            _ => None,
        }
    }
}

impl WriteError for crate::EraseError {
    fn storage(&self) -> Option<&StorageError> {
        match self {
            crate::EraseError::Storage(s) => Some(s),
            _ => None,
        }
    }
}

/// A pooled reader connection; goes back to the pool on drop unless left inside a transaction.
#[derive(Debug)]
pub(crate) struct PooledReader<'l> {
    ledger: &'l Ledger,
    conn: Option<Connection>,
}

impl std::ops::Deref for PooledReader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for PooledReader<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for PooledReader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let mut readers = lock(&self.ledger.readers);
            if conn.is_autocommit() && readers.len() < MAX_IDLE_READERS {
                readers.push(conn);
            }
        }
    }
}

/// Locks a mutex; a panic in another thread cannot leave SQLite state half-done (an open
/// transaction is rolled back when dropped), so a poisoned lock is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn open_connection(path: &Path, mode: OpenMode) -> Result<Connection, OpenError> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    if mode == OpenMode::ReadWrite {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let opened = Connection::open_with_flags(path, flags).and_then(|conn| {
        if mode == OpenMode::Inspect {
            // 128 pages: a reader's cache holds the B-trees' interior pages (about 100 at
            // 500,000 records) and what one read touches. At SQLite's default (2 MB each) a
            // server's pooled readers filled theirs for ten minutes of a soak, its resident
            // memory growing all the while; beyond the cache a page is read from the OS's.
            conn.execute_batch("PRAGMA query_only = ON; PRAGMA cache_size = -512;")?;
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))?;
        }
        Ok(conn)
    });
    let conn = match opened {
        Err(e)
            if mode == OpenMode::Inspect
                && e.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen)
                && !companion(path, "-wal").exists()
                && !companion(path, "-shm").exists() =>
        {
            return open_immutable(path);
        }
        other => other.map_err(sql_err(path))?,
    };
    store::configure(&conn, path)?;
    Ok(conn)
}

/// Opens a cleanly closed ledger (no WAL file) on read-only media, where SQLite cannot create
/// the shared-memory file it reads a WAL-mode database through: nothing can change the file
/// there, so it is read as immutable.
fn open_immutable(path: &Path) -> Result<Connection, OpenError> {
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(uri, flags).map_err(sql_err(path))?;
    store::configure(&conn, path)?;
    conn.execute_batch("PRAGMA query_only = ON;").map_err(sql_err(path))?;
    Ok(conn)
}

/// `path` with every byte outside the URI's unreserved characters and `/` percent-encoded.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The ledger file's `-wal` or `-shm` companion.
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Creates a new ledger file with its schema under a temporary name, then links it into place,
/// so that `path` never names a half-created ledger: a crash during creation leaves either no
/// ledger or an initialised one. Linking (not renaming) fails if another process created the
/// ledger meanwhile, and then that ledger is used.
fn create_initialised(path: &Path) -> Result<(), OpenError> {
    let io = |op: &'static str, at: &Path| {
        let at = at.to_owned();
        move |source: std::io::Error| OpenError::Storage(StorageError::Io { op, path: at, source })
    };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.creating-{}", std::process::id()));
    if tmp.exists() {
        fs_err::remove_file(&tmp).map_err(io("removing a stale", &tmp))?;
    }
    // Created private before SQLite sees it: its WAL and shared-memory files take its mode.
    private_files::create_private_file(&tmp).map_err(io("creating", &tmp))?;
    {
        let conn = open_connection(&tmp, OpenMode::ReadWrite)?;
        set_wal(&conn, &tmp)?;
        initialise(&conn, &tmp)?;
        conn.close().map_err(|(_, e)| sql_err(&tmp)(e))?;
    }
    match fs_err::hard_link(&tmp, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("linking the new ledger into place at", path)(e)),
    }
    fs_err::remove_file(&tmp).map_err(io("removing the temporary", &tmp))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs_err::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing the directory of", path))?;
    }
    Ok(())
}

fn set_wal(conn: &Connection, path: &Path) -> Result<(), OpenError> {
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(sql_err(path))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Storage(StorageError::Io {
            op: "enabling WAL journal mode on",
            path: path.to_owned(),
            source: std::io::Error::other(format!("sqlite kept journal mode {mode}")),
        }));
    }
    Ok(())
}

/// Refuses, by reading only, a file that is not a ledger: another application id, tables
/// without ours, or (for inspection) an empty database; and a ledger of a format version this
/// build does not read.
fn refuse_foreign(conn: &Connection, path: &Path, mode: OpenMode) -> Result<(), OpenError> {
    let sql = sql_err(path);
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(&sql)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))
        .map_err(&sql)?;
    let corrupted = |detail: String| OpenError::Corrupted { path: path.to_owned(), detail };
    if app_id == 0 && tables == 0 {
        return match mode {
            OpenMode::ReadWrite => Ok(()),
            OpenMode::Inspect => {
                Err(corrupted("the file holds no ledger (an empty database)".to_owned()))
            }
        };
    }
    if app_id != APPLICATION_ID {
        return Err(corrupted(format!("application_id is {app_id:#x}, not an EviCortex ledger")));
    }
    let has_meta: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_meta'",
            [],
            |r| r.get(0),
        )
        .map_err(&sql)?;
    if has_meta == 1 {
        let meta = store::read_meta(conn).map_err(&sql)?;
        if let Some(found) = meta.format_version.filter(|v| *v != FORMAT_VERSION.to_string()) {
            return Err(OpenError::unsupported_format(path, found));
        }
    }
    Ok(())
}

/// Creates the schema in an empty file; leaves an existing ledger alone (`refuse_foreign` has
/// refused anything else).
fn initialise(conn: &Connection, path: &Path) -> Result<(), OpenError> {
    let sql = sql_err(path);
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))
        .map_err(&sql)?;
    if tables > 0 {
        return Ok(());
    }
    let tx = conn_begin_immediate(conn, path)?;
    // Another process may have initialised the file while we waited for the lock.
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))
        .map_err(&sql)?;
    if tables == 0 {
        conn.execute_batch(store::SCHEMA).map_err(&sql)?;
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(&sql)?;
        let now = chrono::Utc::now().timestamp_micros().to_string();
        for (key, value) in [
            ("format_version", FORMAT_VERSION.to_string()),
            ("head_seq", "0".to_owned()),
            ("chain_head", ChainHash::GENESIS.to_hex()),
            ("created_utc_us", now),
        ] {
            conn.execute("INSERT INTO ledger_meta (key, value) VALUES (?1, ?2)", [key, &value])
                .map_err(&sql)?;
        }
    }
    tx.commit().map_err(&sql)?;
    Ok(())
}

fn conn_begin_immediate<'c>(
    conn: &'c Connection,
    path: &Path,
) -> Result<rusqlite::Transaction<'c>, OpenError> {
    rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
        .map_err(|e| OpenError::Storage(sql_err(path)(e)))
}

/// The cheap open-time check: the format version, and the recorded head against the last
/// record. Returns what is wrong, or refuses outright a format this build cannot read.
fn check_open(conn: &Connection, path: &Path) -> Result<Option<String>, OpenError> {
    let sql = sql_err(path);
    let has_meta: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('ledger_meta', 'records')",
            [],
            |r| r.get(0),
        )
        .map_err(&sql)?;
    if has_meta != 2 {
        return Ok(Some("the ledger_meta or records table is missing".to_owned()));
    }
    let meta = store::read_meta(conn).map_err(&sql)?;
    match meta.format_version.as_deref() {
        Some(v) if v == FORMAT_VERSION.to_string() => {}
        Some(other) => return Err(OpenError::unsupported_format(path, other.to_owned())),
        None => return Ok(Some("metadata lacks format_version".to_owned())),
    }
    let head = match meta.parse() {
        Ok(head) => head,
        Err(detail) => return Ok(Some(detail)),
    };
    let last = store::last_record(conn).map_err(&sql)?;
    let problem = match (head.last, last) {
        (None, None) => None,
        (Some(h), Some((seq, chain))) => {
            if h.raw() != seq as u64 {
                Some(format!(
                    "metadata says the head is record #{}, the last record is #{seq}",
                    h.raw()
                ))
            } else if chain.as_slice() != head.chain.as_bytes() {
                Some(format!(
                    "the chain hash of the last record #{seq} does not match the recorded chain head"
                ))
            } else {
                None
            }
        }
        (None, Some((seq, _))) => {
            Some(format!("metadata says the ledger is empty, but it holds records up to #{seq}"))
        }
        (Some(h), None) => {
            Some(format!("metadata says the head is record #{}, but there are no records", h.raw()))
        }
    };
    Ok(problem)
}
