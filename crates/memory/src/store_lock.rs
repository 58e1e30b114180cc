//! One writing process per store: every door that writes (the CLI's `serve`, `mcp`, `ingest`,
//! `erase`, `embed`, `encoders --set` and `migrate`; a Python `Memory`; any memory opened with
//! [`crate::MemoryBuilder::lock_store`]) holds an exclusive lock on `<store>/evicortex.lock` while
//! it runs; a second one is refused at once, naming the process that holds it. Read-only
//! commands (`verify`, `stats`, `export`) take no lock: SQLite gives them a consistent snapshot
//! while a writer runs. `compile` and `answer` open the store beside its writer
//! ([`crate::MemoryBuilder::beside_writer`]; with dense retrieval they take the lock when it is
//! free, to embed the namespace's pending turns first): beside another process they embed none
//! and remove no derived file.
//!
//! Why refuse rather than share through SQLite's locking: the ledger alone would stay consistent
//! (each append checks the chain head inside its transaction), but a server keeps state derived
//! from the store in memory and writes vectors in the background under an in-process lock that
//! erasures also take; an erasure by another process could let a server write an erased text's
//! vector back until its next open. One writer per store keeps every invariant in one process.
//!
//! The lock is `flock(2)` (`File::try_lock`): the kernel drops it when the process dies, however
//! it dies, so a crashed server never leaves a stale lock behind. The holder is found through
//! `/proc/locks`, so taking the lock writes nothing (a full disk must not stop a refusal).

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::ErrorClass;

/// The lock file's name inside a store directory.
pub const LOCK_FILE: &str = "evicortex.lock";

/// Held for as long as the command runs; dropping it releases the lock.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

/// Why the lock could not be taken ([`ErrorClass::Io`]: the CLI's exit code 3, like other
/// unavailable resources).
#[derive(Debug, thiserror::Error)]
pub enum StoreLockError {
    /// Another process holds the store.
    #[error(
        "the store {store} is in use by another evicortex process ({holder}): one process at a \
         time may write to a store. Stop it first, or send the turns through the running \
         server's API; read-only commands (compile, verify, stats, export) work meanwhile"
    )]
    Busy {
        /// The store directory.
        store: PathBuf,
        /// The holder, as far as it could be found (`pid 123: evicortex serve ...`).
        holder: String,
    },
    /// The lock file could not be created or locked.
    #[error("locking the store {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

impl StoreLockError {
    /// Always [`ErrorClass::Io`]: the store is unavailable, nothing is wrong with the input.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::Io
    }
}

impl StoreLock {
    /// Takes the store's writer lock, creating the store directory (private) and the lock file
    /// (mode 0600) when missing.
    pub fn acquire(store: &Path) -> Result<StoreLock, StoreLockError> {
        // A PostgreSQL store is locked in its local derived directory: the lock keeps two
        // processes of this machine off its derived files (the ledger serialises its writers).
        let store = &crate::store_files_dir(store).map_err(|e| StoreLockError::Io {
            path: store.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let path = store.join(LOCK_FILE);
        let io = |source| StoreLockError::Io { path: path.clone(), source };
        evicortex_ledger::create_private_dir(store).map_err(io)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        // The umask may have narrowed the mode; the store's files are exactly 0600.
        file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(StoreLock { _file: file }),
            Err(TryLockError::WouldBlock) => {
                let holder = file
                    .metadata()
                    .ok()
                    .and_then(|meta| holder_of(meta.dev(), meta.ino()))
                    .unwrap_or_else(|| "its process id could not be found".to_owned());
                Err(StoreLockError::Busy { store: store.to_owned(), holder })
            }
            Err(TryLockError::Error(source)) => Err(io(source)),
        }
    }
}

/// How a memory stands towards its store's writer lock.
#[derive(Debug)]
pub(crate) enum StoreAccess {
    /// No lock asked for: a library memory whose caller keeps to one writer per store.
    Unlocked,
    /// The lock, held for as long as the memory lives.
    Held {
        /// Dropped with the memory, which releases the lock.
        _lock: StoreLock,
    },
    /// Opened beside whatever process writes the store (with why the lock was not taken, when
    /// it was tried): this memory embeds no turn and removes no derived file.
    Beside(Option<StoreLockError>),
}

impl StoreAccess {
    /// Whether this memory holds the store's lock: no other writer can run beside it.
    pub(crate) fn held(&self) -> bool {
        matches!(self, StoreAccess::Held { .. })
    }

    /// What a builder asked for, taken now.
    pub(crate) fn take(store: &Path, asked: LockRequest) -> Result<StoreAccess, StoreLockError> {
        match asked {
            LockRequest::None => Ok(StoreAccess::Unlocked),
            LockRequest::Lock => Ok(StoreAccess::Held { _lock: StoreLock::acquire(store)? }),
            LockRequest::Beside => Ok(StoreAccess::Beside(None)),
            LockRequest::LockOrBeside => Ok(match StoreLock::acquire(store) {
                Ok(lock) => StoreAccess::Held { _lock: lock },
                Err(refusal) => StoreAccess::Beside(Some(refusal)),
            }),
        }
    }

    /// Whether this memory was opened beside the store's writer.
    pub(crate) fn beside(&self) -> bool {
        matches!(self, StoreAccess::Beside(_))
    }
}

/// What a [`crate::MemoryBuilder`] asks of the store's writer lock.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum LockRequest {
    /// Nothing ([`StoreAccess::Unlocked`]).
    #[default]
    None,
    /// The lock, or a refusal.
    Lock,
    /// No lock: beside the writer.
    Beside,
    /// The lock when it is free, else beside the process holding it.
    LockOrBeside,
}

/// The process holding a `flock` on the file `(dev, ino)`, from `/proc/locks`, with its command
/// line.
fn holder_of(dev: u64, ino: u64) -> Option<String> {
    let locks = fs_err::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`, device as major:minor in hex.
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let wanted = format!("{major:02x}:{minor:02x}:{ino}");
    let pid = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flock = fields.get(1) == Some(&"FLOCK");
        (flock && fields.get(5) == Some(&wanted.as_str())).then(|| fields[4].to_owned())
    })?;
    let command = fs_err::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    Some(if command.is_empty() { format!("pid {pid}") } else { format!("pid {pid}: {command}") })
}

/// The major number of a Linux `dev_t` (glibc's `gnu_dev_major`).
fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

/// The minor number of a Linux `dev_t` (glibc's `gnu_dev_minor`).
fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_dropping_the_first_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let first = StoreLock::acquire(&store).unwrap();
        let mode = fs_err::metadata(store.join(LOCK_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        match StoreLock::acquire(&store) {
            Err(StoreLockError::Busy { holder, .. }) => {
                assert!(holder.starts_with(&format!("pid {}", std::process::id())), "{holder}");
            }
            other => panic!("expected the store to be busy, got {other:?}"),
        }
        drop(first);
        StoreLock::acquire(&store).expect("the lock is free once its holder is dropped");
    }
}

#[cfg(test)]
mod memory_tests {
    use crate::{Memory, OpenError, StoreLockError};

    #[test]
    fn a_memory_opened_with_the_lock_holds_it_until_dropped_and_readers_need_none() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Memory::builder(dir.path()).lock_store().open().unwrap();
        match Memory::builder(dir.path()).lock_store().open() {
            Err(OpenError::Locked(StoreLockError::Busy { holder, .. })) => {
                assert!(holder.starts_with(&format!("pid {}", std::process::id())), "{holder}");
            }
            other => panic!("expected the store to be in use, got {:?}", other.map(|_| ())),
        }
        Memory::open_read_only(dir.path()).expect("a reader takes no lock");
        drop(writer);
        Memory::builder(dir.path()).lock_store().open().expect("free once the writer is gone");
    }
}
