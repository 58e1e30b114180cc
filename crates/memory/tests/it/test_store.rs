//! The store a test runs on: a temporary directory (the embedded ledger) or a database of its
//! own on the PostgreSQL test server with a temporary derived directory, as
//! `EVICORTEX_TEST_BACKEND` says (`embedded`, the default, or `postgres`), so that one suite
//! checks both backends. `postgres` needs a server: `scripts/postgres start`, then export the
//! URL it prints as EVICORTEX_TEST_POSTGRES_URL.

use std::path::Path;

use evicortex::{CompiledContext, DenseIndexRef, Memory, MemoryBuilder};

pub(crate) use crate::test_db::TestDb;

const BACKEND_ENV: &str = "EVICORTEX_TEST_BACKEND";

/// Which ledger the suite's stores use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Embedded,
    Postgres,
}

impl Backend {
    /// The backend `EVICORTEX_TEST_BACKEND` names. Anything else is a panic: a misspelt backend
    /// must never quietly test the embedded one again.
    pub(crate) fn from_env() -> Backend {
        match std::env::var(BACKEND_ENV) {
            Err(std::env::VarError::NotPresent) => Backend::Embedded,
            Ok(value) if value.is_empty() || value == "embedded" => Backend::Embedded,
            Ok(value) if value == "postgres" => Backend::Postgres,
            Ok(value) => panic!("{BACKEND_ENV}={value:?}: expected `embedded` or `postgres`"),
            Err(e) => panic!("{BACKEND_ENV}: {e}"),
        }
    }
}

/// A store of its own for one test, removed when dropped.
pub(crate) enum TestStore {
    Embedded(tempfile::TempDir),
    Postgres { db: TestDb, derived: tempfile::TempDir },
}

impl TestStore {
    /// A fresh store on the backend the environment names ([`Backend::from_env`]).
    pub(crate) fn new() -> TestStore {
        match Backend::from_env() {
            Backend::Embedded => TestStore::embedded(),
            Backend::Postgres => TestStore::postgres(),
        }
    }

    pub(crate) fn embedded() -> TestStore {
        TestStore::Embedded(tempfile::tempdir().unwrap())
    }

    pub(crate) fn postgres() -> TestStore {
        TestStore::Postgres { db: TestDb::new(), derived: tempfile::tempdir().unwrap() }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            TestStore::Embedded(_) => Backend::Embedded,
            TestStore::Postgres { .. } => Backend::Postgres,
        }
    }

    /// How to open this store; an encoder, reranker and so on may still be added.
    pub(crate) fn builder(&self) -> MemoryBuilder {
        match self {
            TestStore::Embedded(dir) => Memory::builder(dir.path()),
            TestStore::Postgres { db, derived } => {
                let mut builder = Memory::builder(&db.url);
                builder.derived_dir(derived.path());
                builder
            }
        }
    }

    /// The store opened without an encoder (lexical retrieval only).
    pub(crate) fn open(&self) -> Memory {
        self.builder().open().expect("opening the test store")
    }

    /// The local directory of the store's derived files (embedding cache, `encoders.json`): the
    /// store directory itself, or the PostgreSQL store's derived directory.
    pub(crate) fn files_dir(&self) -> &Path {
        match self {
            TestStore::Embedded(dir) => dir.path(),
            TestStore::Postgres { derived, .. } => derived.path(),
        }
    }

    /// The database's URL, for a PostgreSQL store.
    pub(crate) fn postgres_url(&self) -> Option<&str> {
        match self {
            TestStore::Embedded(_) => None,
            TestStore::Postgres { db, .. } => Some(&db.url),
        }
    }

    /// Panics unless `context`'s dense list came from this backend's exact search: the local
    /// scan of the embedding cache, or pgvector, which chooses between its HNSW index and an
    /// exact scan by the filter's selectivity.
    pub(crate) fn assert_dense_from_exact_search(&self, context: &CompiledContext) {
        let served = &context.dense_index;
        match self.backend() {
            Backend::Embedded => assert_eq!(*served, Some(DenseIndexRef::Exact)),
            Backend::Postgres => assert!(
                matches!(
                    served,
                    Some(DenseIndexRef::PgvectorHnsw { .. } | DenseIndexRef::PgvectorExact)
                ),
                "the dense list of a PostgreSQL store comes from pgvector: {served:?}"
            ),
        }
    }
}

/// The pgvector table of each encoder a PostgreSQL store has registered, in registration order.
pub(crate) fn pgvector_tables(client: &mut postgres::Client) -> Vec<String> {
    client
        .query("SELECT format('vectors_e%s', id) FROM vector_encoders ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}
