//! The vector store's tables: created idempotently, then only checked.
//!
//! `vector_encoders` registers each encoder identity with its dimension and the HNSW build
//! parameters its index was made with; `vector_partitions` maps (encoder, namespace) to the
//! partition holding them; `vector_scrub_pending` lists the partitions a removal still has to
//! rewrite (`scrub.rs`). Table names are made from those numeric ids only, never from a
//! namespace or an identity, so no caller's text is ever part of an SQL identifier.

use postgres::{GenericClient, Transaction};

use crate::VectorStoreError;

/// The advisory lock serialising the creation of tables and partitions between connections
/// ("EVVC"; transaction-scoped). Another value than the ledger's schema lock.
const VECTOR_SCHEMA_LOCK: i64 = 0x4556_5643;

/// pgvector 0.6 indexes at most this many dimensions with HNSW.
const MAX_INDEXED_DIM: usize = 2000;

const CREATE_REGISTRY: &str = "
CREATE TABLE IF NOT EXISTS vector_encoders (
    id                   INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    identity             TEXT NOT NULL UNIQUE,
    dim                  INTEGER NOT NULL CHECK (dim > 0),
    hnsw_m               INTEGER NOT NULL,
    hnsw_ef_construction INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS vector_partitions (
    id        INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    encoder   INTEGER NOT NULL REFERENCES vector_encoders (id),
    namespace TEXT NOT NULL,
    row_count BIGINT NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    UNIQUE (encoder, namespace)
);
CREATE TABLE IF NOT EXISTS vector_scrub_pending (
    partition TEXT PRIMARY KEY,
    erase_xid TEXT NOT NULL
);
";

/// The parameters an HNSW index is built with (pgvector's `m` and `ef_construction`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HnswBuild {
    /// Links per element on each layer (pgvector accepts 2..=100).
    pub m: u32,
    /// Width of the beam that links a new element (pgvector accepts 4..=1000, at least `2m`).
    pub ef_construction: u32,
}

impl Default for HnswBuild {
    /// The embedded HNSW index's defaults (`evicortex_vector::HnswParams`).
    fn default() -> HnswBuild {
        HnswBuild { m: 16, ef_construction: 200 }
    }
}

/// An encoder's vectors: its identity, their dimension, and how its index is built when the
/// store first meets the encoder (an index already built keeps its recorded parameters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncoderSpace {
    /// The encoder identity every vector carries.
    pub identity: String,
    /// The dimension of its vectors.
    pub dim: usize,
    /// The HNSW build parameters for a new index.
    pub hnsw: HnswBuild,
}

/// A registered encoder, as the store records it.
#[derive(Clone, Debug)]
pub(crate) struct Registered {
    pub id: i32,
    pub dim: usize,
    pub hnsw: HnswBuild,
}

impl Registered {
    /// The encoder's table (partitioned by namespace).
    pub fn table(&self) -> String {
        format!("vectors_e{}", self.id)
    }
}

/// Creates the registry tables if missing. Returns whether `vector_partitions` counts its
/// partitions' rows (a registry made by an earlier version does not).
pub(crate) fn ensure_registry(tx: &mut Transaction<'_>) -> Result<bool, postgres::Error> {
    lock(tx)?;
    tx.batch_execute(CREATE_REGISTRY)?;
    Ok(tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'vector_partitions' \
               AND column_name = 'row_count')",
            &[],
        )?
        .get(0))
}

/// Moves `partition`'s counted rows by `delta`, in the transaction that stored or removed
/// them: the count is the partition's, exactly, in every snapshot.
pub(crate) fn add_rows(
    tx: &mut Transaction<'_>,
    partition: &str,
    delta: i64,
) -> Result<(), postgres::Error> {
    if delta != 0 {
        tx.execute(
            "UPDATE vector_partitions SET row_count = row_count + $2 \
             WHERE format('vectors_e%s_p%s', encoder, id) = $1",
            &[&partition, &delta],
        )?;
    }
    Ok(())
}

/// `partition`'s rows, as counted by [`add_rows`] (no scan of the partition).
pub(crate) fn counted_rows(
    client: &mut impl GenericClient,
    partition: &str,
) -> Result<u64, postgres::Error> {
    let n: Option<i64> = client
        .query_opt(
            "SELECT row_count FROM vector_partitions WHERE format('vectors_e%s_p%s', encoder, id) = $1",
            &[&partition],
        )?
        .map(|row| row.get(0));
    Ok(n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0))
}

fn lock(tx: &mut Transaction<'_>) -> Result<(), postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&VECTOR_SCHEMA_LOCK]).map(drop)
}

/// Checks `space`'s parameters before anything is written.
pub(crate) fn check_space(space: &EncoderSpace) -> Result<(), VectorStoreError> {
    let invalid = |field, reason: String| VectorStoreError::InvalidParameter { field, reason };
    if space.identity.is_empty() {
        return Err(invalid("identity", "is empty".to_owned()));
    }
    if space.dim == 0 || space.dim > MAX_INDEXED_DIM {
        return Err(invalid(
            "dim",
            format!("is {}; pgvector's HNSW indexes 1..={MAX_INDEXED_DIM}", space.dim),
        ));
    }
    let HnswBuild { m, ef_construction } = space.hnsw;
    if !(2..=100).contains(&m) {
        return Err(invalid("hnsw.m", format!("is {m}; pgvector accepts 2..=100")));
    }
    if !(4..=1000).contains(&ef_construction) || ef_construction < 2 * m {
        return Err(invalid(
            "hnsw.ef_construction",
            format!("is {ef_construction}; pgvector accepts 4..=1000 and at least 2m ({})", 2 * m),
        ));
    }
    Ok(())
}

/// The encoder's registration: read, or made with its table when the store first meets it. A
/// registration of another dimension is refused. The table's column is checked against the
/// registration, so a table altered behind the store's back is refused too.
pub(crate) fn register(
    tx: &mut Transaction<'_>,
    url: &str,
    space: &EncoderSpace,
) -> Result<Registered, RegisterError> {
    lock(tx)?;
    let registered = match find(tx, &space.identity)? {
        Some(found) => found,
        None => create_encoder_table(tx, space)?,
    };
    if registered.dim != space.dim {
        return Err(RegisterError::Refused(VectorStoreError::EncoderMismatch {
            identity: space.identity.clone(),
            stored: registered.dim,
            requested: space.dim,
        }));
    }
    check_column(tx, url, &space.identity, &registered)?;
    Ok(registered)
}

/// A registration's failure: the database's, or a refusal.
pub(crate) enum RegisterError {
    Database(postgres::Error),
    Refused(VectorStoreError),
}

impl From<postgres::Error> for RegisterError {
    fn from(e: postgres::Error) -> RegisterError {
        RegisterError::Database(e)
    }
}

/// The registration of `identity`, if any.
pub(crate) fn find(
    client: &mut impl GenericClient,
    identity: &str,
) -> Result<Option<Registered>, postgres::Error> {
    let row = client.query_opt(
        "SELECT id, dim, hnsw_m, hnsw_ef_construction FROM vector_encoders WHERE identity = $1",
        &[&identity],
    )?;
    Ok(row.map(|row| Registered {
        id: row.get(0),
        dim: usize::try_from(row.get::<_, i32>(1)).unwrap_or(0),
        hnsw: HnswBuild {
            m: u32::try_from(row.get::<_, i32>(2)).unwrap_or(0),
            ef_construction: u32::try_from(row.get::<_, i32>(3)).unwrap_or(0),
        },
    }))
}

fn create_encoder_table(
    tx: &mut Transaction<'_>,
    space: &EncoderSpace,
) -> Result<Registered, postgres::Error> {
    let (dim, m, ef) =
        (to_i32(space.dim), to_i32(space.hnsw.m), to_i32(space.hnsw.ef_construction));
    let id: i32 = tx
        .query_one(
            "INSERT INTO vector_encoders (identity, dim, hnsw_m, hnsw_ef_construction) \
             VALUES ($1, $2, $3, $4) RETURNING id",
            &[&space.identity, &dim, &m, &ef],
        )?
        .get(0);
    let registered = Registered { id, dim: space.dim, hnsw: space.hnsw };
    let table = registered.table();
    // Indexes made on the parent are made on every partition as it is created; the HNSW index
    // is each partition's own, built once its first rows are in (`ensure_hnsw_index`).
    tx.batch_execute(&format!(
        "CREATE TABLE {table} (
             namespace    TEXT NOT NULL,
             number       BIGINT NOT NULL CHECK (number > 0),
             segment      INTEGER NOT NULL CHECK (segment >= 0),
             event_utc_us BIGINT NOT NULL,
             embedding    vector({dim}) NOT NULL,
             PRIMARY KEY (namespace, number, segment)
         ) PARTITION BY LIST (namespace);
         CREATE INDEX {table}_time ON {table} (event_utc_us);
         ALTER TABLE {table} ALTER COLUMN embedding SET STATISTICS 0;"
    ))?;
    Ok(registered)
}

fn check_column(
    tx: &mut Transaction<'_>,
    url: &str,
    identity: &str,
    registered: &Registered,
) -> Result<(), RegisterError> {
    let table = registered.table();
    let typmod: Option<i32> = tx
        .query_opt(
            "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
               AND a.attname = 'embedding' AND NOT a.attisdropped",
            &[&table],
        )?
        .map(|row| row.get(0));
    let has_segment: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
               AND a.attname = 'segment' AND NOT a.attisdropped)",
            &[&table],
        )?
        .get(0);
    if !has_segment {
        return Err(RegisterError::Refused(VectorStoreError::Inconsistent {
            url: url.to_owned(),
            detail: format!(
                "table {table} has no segment column (it was made by an earlier version); \
                 the vector tables are derived data: drop them and they are rebuilt"
            ),
        }));
    }
    if typmod.and_then(|t| usize::try_from(t).ok()) != Some(registered.dim) {
        return Err(RegisterError::Refused(VectorStoreError::Inconsistent {
            url: url.to_owned(),
            detail: format!(
                "encoder {identity} is registered with dimension {}, but table {table} has {}",
                registered.dim,
                typmod.map_or_else(|| "no embedding column".to_owned(), |t| format!("{t}")),
            ),
        }));
    }
    Ok(())
}

/// Builds `partition`'s HNSW index when it has none yet, over the rows just stored. A
/// partition's first rows arrive together (a namespace's vectors stored at once, as after a
/// migration), and pgvector builds an index over rows already there far faster than it inserts
/// them one by one into an existing graph; rows stored later are linked into the graph as they
/// arrive. The build's memory is sized to hold the graph, since pgvector builds slowly once it
/// no longer fits: raised up to [`BUILD_MEMORY_CAP`] when the server's `maintenance_work_mem`
/// is lower, never lowered below what the server's administrator set. A graph that needs more
/// than both is built anyway, slowly, with a warning naming the setting to raise.
pub(crate) fn ensure_hnsw_index(
    tx: &mut Transaction<'_>,
    encoder: &Registered,
    partition: &str,
) -> Result<(), postgres::Error> {
    let index = format!("{partition}_hnsw");
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() \
             AND tablename = $1 AND indexname = $2)",
            &[&partition, &index],
        )?
        .get(0);
    if exists {
        return Ok(());
    }
    let rows: i64 = tx.query_one(&format!("SELECT count(*) FROM {partition}"), &[])?.get(0);
    let configured: i64 =
        tx.query_one("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))", &[])?.get(0);
    let plan = BuildMemory::plan(encoder, u64::try_from(rows).unwrap_or(0), configured);
    if plan.short {
        tracing::warn!(
            partition,
            rows,
            needed_mib = plan.needed >> 20,
            maintenance_work_mem_mib = plan.bytes >> 20,
            "the HNSW graph of this partition does not fit in maintenance_work_mem; pgvector \
             builds it on disk, far more slowly. Raise it for the database, for example \
             ALTER DATABASE <name> SET maintenance_work_mem = '{}MB'",
            plan.needed.div_ceil(1 << 20)
        );
    }
    if plan.bytes > u64::try_from(configured).unwrap_or(0) {
        tx.batch_execute(&format!("SET LOCAL maintenance_work_mem = '{}MB'", plan.bytes >> 20))?;
    }
    let HnswBuild { m, ef_construction } = encoder.hnsw;
    tx.batch_execute(&format!(
        "CREATE INDEX {index} ON {partition} \
             USING hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {ef_construction})"
    ))
}

/// The most an index build raises `maintenance_work_mem` to on its own: a server that is to
/// build bigger graphs in memory gets a higher setting from its administrator.
pub(crate) const BUILD_MEMORY_CAP: u64 = 1 << 30;

/// The memory an HNSW build runs with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BuildMemory {
    /// What the graph of the partition's rows needs, with room to spare.
    pub needed: u64,
    /// What the build gets: the need within 64 MiB to [`BUILD_MEMORY_CAP`], or the server's
    /// own setting when that is higher.
    pub bytes: u64,
    /// Whether `bytes` falls short of `needed`.
    pub short: bool,
}

impl BuildMemory {
    pub(crate) fn plan(encoder: &Registered, rows: u64, configured: i64) -> BuildMemory {
        // pgvector holds each row's vector and its neighbour lists, twice the estimate for its
        // own bookkeeping.
        let per_row = encoder.dim as u64 * 4 + u64::from(encoder.hnsw.m) * 2 * 8 + 64;
        let needed = rows * per_row * 2;
        let ours = needed.clamp(64 << 20, BUILD_MEMORY_CAP);
        let bytes = ours.max(u64::try_from(configured).unwrap_or(0));
        BuildMemory { needed, bytes, short: bytes < needed }
    }
}

/// The partition holding `namespace`'s vectors of `encoder`, if it exists.
pub(crate) fn find_partition(
    client: &mut impl GenericClient,
    encoder: &Registered,
    namespace: &str,
) -> Result<Option<String>, postgres::Error> {
    let row = client.query_opt(
        "SELECT id FROM vector_partitions WHERE encoder = $1 AND namespace = $2",
        &[&encoder.id, &namespace],
    )?;
    Ok(row.map(|row| partition_name(encoder, row.get(0))))
}

/// The partition holding `namespace`'s vectors of `encoder`, created if missing.
pub(crate) fn ensure_partition(
    tx: &mut Transaction<'_>,
    encoder: &Registered,
    namespace: &str,
) -> Result<String, postgres::Error> {
    if let Some(found) = find_partition(tx, encoder, namespace)? {
        return Ok(found);
    }
    lock(tx)?;
    if let Some(found) = find_partition(tx, encoder, namespace)? {
        return Ok(found);
    }
    let id: i32 = tx
        .query_one(
            "INSERT INTO vector_partitions (encoder, namespace) VALUES ($1, $2) RETURNING id",
            &[&encoder.id, &namespace],
        )?
        .get(0);
    let name = partition_name(encoder, id);
    // DDL takes no parameters: the server quotes the namespace as a literal itself.
    let ddl: String = tx
        .query_one(
            "SELECT format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (%L)', $1::text, $2::text, $3::text)",
            &[&name, &encoder.table(), &namespace],
        )?
        .get(0);
    tx.batch_execute(&ddl)?;
    // ANALYZE would otherwise keep a sample of the vectors in pg_statistic, where an erased
    // one would outlive its row (a new partition does not inherit the parent's setting).
    tx.batch_execute(&format!("ALTER TABLE {name} ALTER COLUMN embedding SET STATISTICS 0"))?;
    Ok(name)
}

fn partition_name(encoder: &Registered, id: i32) -> String {
    partition_name_of(encoder.id, id)
}

pub(crate) fn partition_name_of(encoder: i32, partition: i32) -> String {
    format!("vectors_e{encoder}_p{partition}")
}

/// Whether `name` is a partition name this module makes (`vectors_e<id>_p<id>`): a name read
/// back from a table is checked before it becomes part of a statement.
pub(crate) fn is_partition_name(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("vectors_e")
        .and_then(|rest| rest.split_once("_p"))
        .is_some_and(|(e, p)| digits(e) && digits(p))
}

/// Every partition of `namespace`, over all encoders (an erasure removes every encoder's
/// vectors of a record).
pub(crate) fn partitions_of(
    client: &mut impl GenericClient,
    namespace: &str,
) -> Result<Vec<String>, postgres::Error> {
    let rows = client.query(
        "SELECT encoder, id FROM vector_partitions WHERE namespace = $1 ORDER BY encoder",
        &[&namespace],
    )?;
    Ok(rows.iter().map(|row| partition_name_of(row.get(0), row.get(1))).collect())
}

/// A checked parameter as PostgreSQL's `integer` (all are far below its range).
fn to_i32(x: impl TryInto<i32>) -> i32 {
    x.try_into().unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn minilm() -> Registered {
        Registered { id: 1, dim: 384, hnsw: HnswBuild { m: 16, ef_construction: 200 } }
    }

    #[test]
    fn a_small_graph_gets_the_floor_and_a_big_one_the_cap_with_a_warning() {
        let small = BuildMemory::plan(&minilm(), 10_000, 64 * MIB as i64);
        assert_eq!(small, BuildMemory { needed: 37_120_000, bytes: 64 * MIB, short: false });
        let big = BuildMemory::plan(&minilm(), 1_000_000, 64 * MIB as i64);
        assert_eq!(big.bytes, BUILD_MEMORY_CAP);
        assert!(big.short, "{big:?}");
    }

    #[test]
    fn the_administrators_setting_is_never_lowered_and_lets_a_big_graph_fit() {
        let small = BuildMemory::plan(&minilm(), 10_000, 2048 * MIB as i64);
        assert_eq!(small.bytes, 2048 * MIB);
        let big = BuildMemory::plan(&minilm(), 1_000_000, 4096 * MIB as i64);
        assert_eq!(big, BuildMemory { needed: 3_712_000_000, bytes: 4096 * MIB, short: false });
    }
}
