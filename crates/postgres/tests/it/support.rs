//! A fresh database per test (on the single test server, or on the primary of the replicated
//! pair), and turns to append.

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex_postgres::PgLedger;

pub use crate::test_db::{ReplicatedDb, TestDb};

impl TestDb {
    pub fn ledger(&self) -> PgLedger {
        PgLedger::connect(&self.url).unwrap_or_else(|e| panic!("connecting the ledger: {e}"))
    }
}

impl ReplicatedDb {
    pub fn primary_ledger(&self) -> PgLedger {
        self.primary.ledger()
    }

    pub fn replica_ledger(&self) -> PgLedger {
        PgLedger::connect(&self.replica_url)
            .unwrap_or_else(|e| panic!("connecting the ledger on the standby: {e}"))
    }
}

pub fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

pub fn turn(namespace: &str, session: &str, index: u32, text: &str) -> Turn {
    Turn {
        namespace: ns(namespace),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: if index.is_multiple_of(2) { Role::User } else { Role::Assistant },
        speaker: index.is_multiple_of(3).then(|| "Ada".to_owned()),
        text: text.to_owned(),
        time: EventTime::parse_rfc3339(&format!("2024-05-02T10:{:02}:00.25+01:00", index % 60))
            .unwrap(),
        meta: serde_json::from_str(&format!(r#"{{"z": {index}, "a": ["x", null]}}"#)).unwrap(),
    }
}

/// One count from a raw query.
pub fn count(db: &TestDb, sql: &str) -> i64 {
    db.raw().query_one(sql, &[]).unwrap().get(0)
}
