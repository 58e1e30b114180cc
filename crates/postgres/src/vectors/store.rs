//! The handle: connection, encoder registrations, writes and erasure.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

use evicortex_core::{Namespace, TurnId};
use postgres::Client;

use super::{
    EncoderSpace, HnswBuild, VectorStoreError, literal,
    schema::{self, RegisterError, Registered},
    scrub,
};
use crate::{
    client_pool::{ClientGuard, ClientPool},
    connect::{ConnectFailure, connect},
    redact_password,
};

/// pgvector accepts `hnsw.ef_search` in 1..=1000.
pub(crate) const MAX_EF_SEARCH: u32 = 1000;

/// One vector to store: the record it embeds (and which segment of the record's text, for a
/// text embedded in several windows) and the record's event time.
#[derive(Copy, Clone, Debug)]
pub struct StoredVector<'a> {
    /// The record's number in its namespace.
    pub record: TurnId,
    /// Which window of the record's text (0 for a text embedded whole).
    pub segment: u32,
    /// The record's event time, UTC microseconds (what the as-of filter compares).
    pub event_utc_micros: i64,
    /// The vector (any non-zero finite vector; it is stored scaled to unit length).
    pub vector: &'a [f32],
}

/// Dense vectors in a PostgreSQL database with pgvector, one table per encoder, one partition
/// per namespace. `Send + Sync`: concurrent calls run on connections of their own (a pool, as
/// for [`crate::PgLedger`]).
pub struct PgVectors {
    client: ClientPool,
    url: String,
    encoders: Mutex<HashMap<String, Registered>>,
    ef_search: u32,
    /// Connected to a hot standby: searches only.
    read_only: bool,
}

impl std::fmt::Debug for PgVectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgVectors")
            .field("url", &self.url)
            .field("ef_search", &self.ef_search)
            .finish_non_exhaustive()
    }
}

impl PgVectors {
    /// Connects to the database named by `url` (a `postgres://` URL or a key-value string; TLS
    /// as for [`crate::PgLedger::connect`]), checks the `vector` extension, creates the store's
    /// registry tables if missing and finishes any rewrite a removal still owes
    /// ([`PgVectors::scrub`]).
    pub fn connect(url: &str) -> Result<PgVectors, VectorStoreError> {
        let (client, shown) = connect_client(url)?;
        PgVectors::open(client, url, &shown)
    }

    /// The store over `client`, an open connection to `connect_url` (from which the pool opens
    /// more); `url` names the server in errors (`connect_url` without its password).
    pub(crate) fn open(
        mut client: Client,
        connect_url: &str,
        url: &str,
    ) -> Result<PgVectors, VectorStoreError> {
        check_extension(&mut client, url)?;
        let read_only: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .map_err(database(url, "asking whether the server is a replica"))?
            .get(0);
        if !read_only {
            let mut tx =
                client.transaction().map_err(database(url, "starting the schema check"))?;
            let counted = schema::ensure_registry(&mut tx)
                .map_err(database(url, "creating the registry tables"))?;
            if !counted {
                return Err(VectorStoreError::Inconsistent {
                    url: url.to_owned(),
                    detail: "vector_partitions has no row_count column (it was made by an earlier \
                             version); the vector tables are derived data: drop them and they \
                             are rebuilt"
                        .to_owned(),
                });
            }
            tx.commit().map_err(database(url, "committing the registry tables"))?;
        }
        let store = PgVectors {
            client: ClientPool::new(client, connect_url, url, |_| Ok(())),
            url: url.to_owned(),
            encoders: Mutex::new(HashMap::new()),
            ef_search: 128,
            read_only,
        };
        // A removal whose rewrite was interrupted is finished before the store is used (on the
        // primary: a replica replays its rewrite).
        if !read_only {
            store.scrub()?;
        }
        Ok(store)
    }

    /// Whether the store is a read replica (a hot standby), which searches but refuses writes.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Refuses a write on a replica before anything is sent.
    pub(crate) fn check_writable(&self) -> Result<(), VectorStoreError> {
        if self.read_only {
            return Err(VectorStoreError::ReadOnlyReplica { url: self.url.clone() });
        }
        Ok(())
    }

    /// The same store searching with `hnsw.ef_search` at least `ef_search` (default 128, the
    /// embedded HNSW index's; a search always uses at least `max(64, n)`).
    pub fn with_ef_search(mut self, ef_search: u32) -> Result<PgVectors, VectorStoreError> {
        if !(1..=MAX_EF_SEARCH).contains(&ef_search) {
            return Err(VectorStoreError::InvalidParameter {
                field: "ef_search",
                reason: format!("is {ef_search}; pgvector accepts 1..={MAX_EF_SEARCH}"),
            });
        }
        self.ef_search = ef_search;
        Ok(self)
    }

    /// The configured `hnsw.ef_search` floor.
    pub fn ef_search(&self) -> u32 {
        self.ef_search
    }

    /// The connection string, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Registers `space`'s encoder, creating its table and index when the store first meets
    /// it, and returns the HNSW parameters its index was built with (the recorded ones when it
    /// already exists). Refuses an identity registered with another dimension.
    pub fn register(&self, space: &EncoderSpace) -> Result<HnswBuild, VectorStoreError> {
        schema::check_space(space)?;
        if self.read_only {
            return self.registered_on_replica(space);
        }
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting the registration"))?;
        let registered = schema::register(&mut tx, &self.url, space).map_err(|e| match e {
            RegisterError::Database(source) => self.db("registering the encoder")(source),
            RegisterError::Refused(refusal) => refusal,
        })?;
        tx.commit().map_err(self.db("committing the registration"))?;
        let hnsw = registered.hnsw;
        self.encoders_cache().insert(space.identity.clone(), registered);
        Ok(hnsw)
    }

    /// Stores `rows` of `identity`'s encoder for `namespace`, all or none. Refuses a vector of
    /// another dimension, an unusable vector, and a record segment that already has one.
    pub fn insert(
        &self,
        identity: &str,
        namespace: &Namespace,
        rows: &[StoredVector<'_>],
    ) -> Result<(), VectorStoreError> {
        self.check_writable()?;
        let encoder = self.encoder(identity)?;
        let prepared = prepare(&encoder, identity, namespace, rows)?;
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting the insert"))?;
        let partition = schema::ensure_partition(&mut tx, &encoder, namespace.as_str())
            .map_err(self.db("creating the namespace's partition"))?;
        let statement = tx
            .prepare(&format!(
                "INSERT INTO {partition} (namespace, number, segment, event_utc_us, embedding) \
                 VALUES ($1, $2, $3, $4, $5::text::vector) ON CONFLICT DO NOTHING"
            ))
            .map_err(self.db("preparing the insert"))?;
        for row in &prepared {
            let inserted = tx
                .execute(
                    &statement,
                    &[&namespace.as_str(), &row.number, &row.segment, &row.time, &row.text],
                )
                .map_err(self.db("inserting a vector"))?;
            if inserted == 0 {
                return Err(VectorStoreError::DuplicateRecord {
                    identity: identity.to_owned(),
                    namespace: namespace.clone(),
                    record: row.record,
                });
            }
        }
        schema::add_rows(&mut tx, &partition, prepared.len() as i64)
            .map_err(self.db("counting the stored rows"))?;
        schema::ensure_hnsw_index(&mut tx, &encoder, &partition)
            .map_err(self.db("building the partition's HNSW index"))?;
        tx.commit().map_err(self.db("committing the insert"))?;
        Ok(())
    }

    /// Removes every encoder's vectors of `records` in `namespace` (an erasure): once this
    /// returns `Ok`, no search returns them and each partition that lost a row has been
    /// rewritten ([`PgVectors::scrub`]), so the removed vectors are left in neither the table's
    /// nor its indexes' files. The HNSW index of such a partition is rebuilt by the rewrite, so
    /// its cost grows with the namespace. Returns the rows removed.
    ///
    /// The write-ahead log still holds the vectors until its segments are retired (the
    /// ledger's scrub does that for the whole server).
    pub fn remove(
        &self,
        namespace: &Namespace,
        records: &[TurnId],
    ) -> Result<u64, VectorStoreError> {
        self.check_writable()?;
        let numbers = records.iter().map(|&r| record_number(r)).collect::<Result<Vec<_>, _>>()?;
        let removed = {
            let mut client = self.client();
            let mut tx = client.transaction().map_err(self.db("starting the removal"))?;
            let partitions = schema::partitions_of(&mut tx, namespace.as_str())
                .map_err(self.db("listing the namespace's partitions"))?;
            let mut removed = 0;
            for partition in partitions {
                let n = tx
                    .execute(
                        &format!("DELETE FROM {partition} WHERE number = ANY($1)"),
                        &[&numbers],
                    )
                    .map_err(self.db("deleting vectors"))?;
                removed += n;
                scrub::owe_rewrite(&mut tx, &partition, n)
                    .map_err(self.db("recording the removed rows and the rewrite owed"))?;
            }
            tx.commit().map_err(self.db("committing the removal"))?;
            removed
        };
        self.scrub()?;
        Ok(removed)
    }

    /// Number of `identity`'s vectors stored for `namespace`.
    pub fn count(&self, identity: &str, namespace: &Namespace) -> Result<u64, VectorStoreError> {
        let encoder = self.encoder(identity)?;
        let mut client = self.client();
        let Some(partition) = schema::find_partition(&mut *client, &encoder, namespace.as_str())
            .map_err(self.db("finding the namespace's partition"))?
        else {
            return Ok(0);
        };
        schema::counted_rows(&mut *client, &partition).map_err(self.db("counting vectors"))
    }

    /// `identity`'s registration, from the cache or the database.
    pub(crate) fn encoder(&self, identity: &str) -> Result<Registered, VectorStoreError> {
        if let Some(found) = self.encoders_cache().get(identity) {
            return Ok(found.clone());
        }
        let found = schema::find(&mut *self.client(), identity)
            .map_err(self.db("reading the encoder registry"))?
            .ok_or_else(|| VectorStoreError::UnknownEncoder { identity: identity.to_owned() })?;
        self.encoders_cache().insert(identity.to_owned(), found.clone());
        Ok(found)
    }

    /// On a replica, an encoder is only looked up: one the primary never registered has no
    /// vectors to search, which is refused rather than answered with an empty list.
    fn registered_on_replica(&self, space: &EncoderSpace) -> Result<HnswBuild, VectorStoreError> {
        let found = schema::find(&mut *self.client(), &space.identity)
            .map_err(self.db("reading the encoder registry"))?
            .ok_or_else(|| VectorStoreError::UnknownEncoder { identity: space.identity.clone() })?;
        if found.dim != space.dim {
            return Err(VectorStoreError::EncoderMismatch {
                identity: space.identity.clone(),
                stored: found.dim,
                requested: space.dim,
            });
        }
        let hnsw = found.hnsw;
        self.encoders_cache().insert(space.identity.clone(), found);
        Ok(hnsw)
    }

    /// The connection, for one call. A dropped transaction rolls back, so a lock poisoned by a
    /// panic leaves a usable connection.
    pub(crate) fn client(&self) -> ClientGuard<'_> {
        self.client.lock()
    }

    fn encoders_cache(&self) -> MutexGuard<'_, HashMap<String, Registered>> {
        self.encoders.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Maps a client error to [`VectorStoreError::Database`] naming this store and `op`.
    pub(crate) fn db(&self, op: &'static str) -> impl Fn(postgres::Error) -> VectorStoreError + '_ {
        database(&self.url, op)
    }
}

pub(crate) fn database<'u>(
    url: &'u str,
    op: &'static str,
) -> impl Fn(postgres::Error) -> VectorStoreError + 'u {
    move |source| VectorStoreError::Database { url: url.to_owned(), op, source }
}

/// A record number as the table's `bigint`; numbers start at 1.
fn record_number(record: TurnId) -> Result<i64, VectorStoreError> {
    i64::try_from(record.raw()).ok().filter(|&n| n > 0).ok_or_else(|| {
        VectorStoreError::InvalidParameter {
            field: "record",
            reason: format!("{record} is not a record number (1..=2^63-1)"),
        }
    })
}

/// A connection to `url`, with the URL as errors show it (without its password).
pub(crate) fn connect_client(url: &str) -> Result<(Client, String), VectorStoreError> {
    let shown = redact_password(url);
    let client = connect(url, &shown).map_err(|failure| match failure {
        ConnectFailure::InvalidUrl(source) => database(&shown, "parsing the URL")(source),
        ConnectFailure::Tls(e) => VectorStoreError::Tls(e),
        ConnectFailure::Server(source) => database(&shown, "connecting")(source),
    })?;
    Ok((client, shown))
}

/// Refuses a database without pgvector, or with one older than 0.5 (no HNSW).
pub(crate) fn check_extension(client: &mut Client, url: &str) -> Result<(), VectorStoreError> {
    let version: Option<String> = client
        .query_opt("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[])
        .map_err(database(url, "looking for the vector extension"))?
        .map(|row| row.get(0));
    let Some(version) = version else {
        return Err(VectorStoreError::Extension {
            url: url.to_owned(),
            found: "no vector extension".to_owned(),
        });
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < (0, 5) {
        return Err(VectorStoreError::Extension {
            url: url.to_owned(),
            found: format!("the vector extension {version}"),
        });
    }
    Ok(())
}

/// A checked row, as sent.
pub(crate) struct PreparedRow {
    pub record: TurnId,
    pub number: i64,
    pub segment: i32,
    pub time: i64,
    pub text: String,
}

/// `rows` checked against `encoder` (dimension, usable vector, record number) and scaled to
/// unit length, or the first one refused.
pub(crate) fn prepare(
    encoder: &Registered,
    identity: &str,
    namespace: &Namespace,
    rows: &[StoredVector<'_>],
) -> Result<Vec<PreparedRow>, VectorStoreError> {
    rows.iter()
        .map(|row| {
            let number = record_number(row.record)?;
            if row.vector.len() != encoder.dim {
                return Err(VectorStoreError::Dimension {
                    identity: identity.to_owned(),
                    namespace: namespace.clone(),
                    record: Some(row.record),
                    got: row.vector.len(),
                    expected: encoder.dim,
                });
            }
            let unit =
                literal::unit(row.vector).map_err(|reason| VectorStoreError::InvalidVector {
                    namespace: namespace.clone(),
                    record: Some(row.record),
                    reason,
                })?;
            let segment =
                i32::try_from(row.segment).map_err(|_| VectorStoreError::InvalidParameter {
                    field: "segment",
                    reason: format!("is {}; at most {}", row.segment, i32::MAX),
                })?;
            Ok(PreparedRow {
                record: row.record,
                number,
                segment,
                time: row.event_utc_micros,
                text: literal::text(&unit),
            })
        })
        .collect()
}
