use std::path::{Path, PathBuf};

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex_ledger::Ledger;

pub fn turn(ns: &str, session: &str, index: u32, text: &str) -> Turn {
    Turn {
        namespace: Namespace::new(ns).unwrap(),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: if index.is_multiple_of(2) { Role::User } else { Role::Assistant },
        speaker: None,
        text: text.to_owned(),
        time: EventTime::from_parts(1_714_640_400_000_000 + i64::from(index) * 1_000_000, 3600)
            .unwrap(),
        meta: serde_json::Map::new(),
    }
}

pub struct Store {
    // Held for its Drop.
    pub dir: tempfile::TempDir,
    pub ledger: Ledger,
}

impl Store {
    pub fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
        Store { dir, ledger }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("ledger.sqlite")
    }
}

/// A plain SQLite connection to the file, for editing rows behind the ledger's back.
pub fn raw(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    conn
}
