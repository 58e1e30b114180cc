//! `bench ann run --postgres URL`: the audit on a store whose ledger is a PostgreSQL database
//! (dense candidates from pgvector), beside the embedded store's exact scan in the same run. At
//! each size a fresh database `evicortex_ann_audit_<size>` on the server holds the size's turns,
//! its derived directory seeded with the audit store's embedding cache (nothing is embedded
//! again); then, through the `Memory` facade on both stores:
//! - ingest: the turns appended (no embedding) into the database and into a fresh embedded
//!   store;
//! - the first compile on PostgreSQL, which stores every vector in pgvector (its HNSW index is
//!   maintained row by row);
//! - recall@50 of pgvector's dense list against the embedded exact scan, without a filter and
//!   with the as-of filter, and which path served;
//! - compile and dense-stage p50/p99 on both, the question embedded beforehand;
//! - compiles per second with 1, 2 and 4 threads sharing one handle, through the default
//!   connection pool and through one connection (`pool_max=1`), the pool's anchor.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use evicortex::{
    CatchUpLimits, CompileConfig, CompileQuery, CompileRequest, Encoder, EventTime, Evidence,
    IdentifiedVector, Memory, Namespace, ReaderTokenizer, TokenBudget, Turn, reader_tokenizer,
};

use super::{
    audit_compile::{INDEX_CACHE_BYTES, RECALL_AT, audit_config, wait_for_counts},
    table::{load_average, pair},
};

/// One row of the PostgreSQL table.
pub(super) struct PgRow {
    vectors: usize,
    admitted: String,
    recall: f64,
    served: String,
    ingest_embedded: Duration,
    ingest_pg: Duration,
    first_compile: Option<Duration>,
    compile_embedded: Vec<Duration>,
    compile_pg: Vec<Duration>,
    dense_embedded: Vec<Duration>,
    dense_pg: Vec<Duration>,
}

impl PgRow {
    pub(super) const HEADER: &str = "| vectors | as-of admits | recall@50 pgvector vs exact | gate | served by | ingest embedded / PostgreSQL | first compile on PostgreSQL (stores the vectors) | compile p50 / p99 embedded exact | compile p50 / p99 PostgreSQL | dense p50 / p99 embedded exact | dense p50 / p99 PostgreSQL | load avg |\n|---|---|---|---|---|---|---|---|---|---|---|---|";

    pub(super) fn recall(&self) -> f64 {
        self.recall
    }

    pub(super) fn line(&self, gate: f64) -> String {
        let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        format!(
            "| {} | {} | {:.4} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} |",
            self.vectors,
            self.admitted,
            self.recall,
            if self.recall >= gate { "pass" } else { "FAIL" },
            self.served,
            secs(self.ingest_embedded),
            secs(self.ingest_pg),
            self.first_compile.map_or("-".to_owned(), secs),
            pair(&self.compile_embedded),
            pair(&self.compile_pg),
            pair(&self.dense_embedded),
            pair(&self.dense_pg),
            load_average(),
        )
    }
}

/// Concurrent compiles on one PostgreSQL handle: pooled against one connection.
pub(super) struct PgThroughput {
    vectors: usize,
    threads: usize,
    single: f64,
    pooled: f64,
    /// The embedded store's exact scan, the same questions.
    embedded: f64,
}

impl PgThroughput {
    pub(super) const HEADER: &str = "| vectors | threads | compiles/s, one connection (pool_max=1) | compiles/s, default pool | pooled / one | compiles/s, embedded exact | load avg |\n|---|--:|--:|--:|--:|--:|---|";

    pub(super) fn line(&self) -> String {
        format!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {} |",
            self.vectors,
            self.threads,
            self.single,
            self.pooled,
            self.pooled / self.single,
            self.embedded,
            load_average()
        )
    }
}

/// What one size's PostgreSQL audit needs.
pub(super) struct PgAudit<'a> {
    pub server: &'a str,
    pub audit_store: &'a Path,
    /// The embedded store of this size (the exact scan's side), already filled.
    pub size_dir: &'a Path,
    pub size: usize,
    pub vectors: usize,
    pub turns: &'a [Evidence],
    pub encoder: &'a Arc<dyn Encoder>,
    pub questions: &'a [String],
    pub as_of_fraction: f64,
    /// The database's `maintenance_work_mem`, when set for it.
    pub maintenance_work_mem_mib: Option<u64>,
}

/// The rows of one size: without a filter, then with the as-of filter.
pub(super) fn measure(audit: &PgAudit<'_>) -> anyhow::Result<(Vec<PgRow>, Vec<PgThroughput>)> {
    let name = format!("evicortex_ann_audit_{}", audit.size);
    let url = fresh_database(audit.server, &name, audit.maintenance_work_mem_mib)?;
    let derived = audit.size_dir.with_file_name(format!("{name}-derived"));
    let (pg, ingest) = fill_database(audit, &url, &derived)?;
    let exact = Memory::builder(audit.size_dir)
        .encoder(Arc::clone(audit.encoder))
        .ann(None)
        .index_cache_bytes(INDEX_CACHE_BYTES)
        .open()?;
    let compiles = PgCompiles {
        namespace: Namespace::new(super::audit_set::AUDIT_NAMESPACE)?,
        questions: audit.questions,
        vectors: audit.questions.iter().map(|q| exact.embed_query(q)).collect::<Result<_, _>>()?,
        reader: reader_tokenizer("o200k_base")?,
        config: audit_config(),
    };
    let mut rows = Vec::new();
    for filtered in [false, true] {
        rows.push(measure_row(audit, &compiles, [&pg, &exact], filtered, ingest)?);
    }
    let throughput = measure_throughput(audit, &compiles, pg, &exact, &url, &derived)?;
    Ok((rows, throughput))
}

/// Fills the size's database: its derived directory claimed and seeded with the audit store's
/// embedding cache, so that the vectors are found rather than computed, then the turns appended
/// and caught up. Returns its memory and the appends' time into a fresh embedded store and
/// into the database.
fn fill_database(
    audit: &PgAudit<'_>,
    url: &str,
    derived: &Path,
) -> anyhow::Result<(Memory, (Duration, Duration))> {
    if derived.exists() {
        fs_err::remove_dir_all(derived)?;
    }
    // Opening without an encoder claims the directory for the database.
    Memory::builder(url).derived_dir(derived).open()?;
    fs_err::copy(
        audit.audit_store.join(evicortex::EMBEDDINGS_FILE),
        derived.join(evicortex::EMBEDDINGS_FILE),
    )?;
    let owned: Vec<Turn> = audit.turns.iter().map(|e| e.turn.clone()).collect();
    let ingest_embedded = {
        let scratch = tempfile::tempdir()?;
        let memory = Memory::builder(scratch.path().join("store")).open()?;
        append_timed(&memory, &owned)?
    };
    let pg = Memory::builder(url)
        .derived_dir(derived)
        .encoder(Arc::clone(audit.encoder))
        .index_cache_bytes(INDEX_CACHE_BYTES)
        .open()?;
    let ingest_pg = append_timed(&pg, &owned)?;
    let report = pg.catch_up(None, CatchUpLimits::default(), &mut |_| {})?;
    anyhow::ensure!(
        report.embedded_texts == 0,
        "{} texts had no vector in the audit store's cache",
        report.embedded_texts
    );
    Ok((pg, (ingest_embedded, ingest_pg)))
}

/// The audit's compiles on either store: the same questions, embedded once, the same
/// configuration and reader tokens.
struct PgCompiles<'a> {
    namespace: Namespace,
    questions: &'a [String],
    vectors: Vec<IdentifiedVector>,
    reader: Box<dyn ReaderTokenizer>,
    config: CompileConfig,
}

impl PgCompiles<'_> {
    /// Question `i` at `as_of`, with the audit's budget.
    fn query(&self, i: usize, as_of: Option<EventTime>) -> CompileQuery {
        CompileQuery {
            namespace: self.namespace.clone(),
            question: self.questions[i].clone(),
            as_of,
            budget: TokenBudget::new(2048),
        }
    }

    /// Compiles `query`, question `i`'s, through `memory`; returns its dense stage's time.
    fn compile(&self, memory: &Memory, i: usize, query: &CompileQuery) -> anyhow::Result<Duration> {
        let report = memory.compile_report(&CompileRequest {
            query,
            config: &self.config,
            reader: &*self.reader,
            query_vectors: std::slice::from_ref(&self.vectors[i]),
        })?;
        Ok(report.stages.dense)
    }

    /// Question `i` at `as_of` through `memory`: the compile's wall time and its dense stage's.
    fn timed(
        &self,
        memory: &Memory,
        i: usize,
        as_of: Option<EventTime>,
    ) -> anyhow::Result<(Duration, Duration)> {
        let query = self.query(i, as_of);
        let started = Instant::now();
        let dense = self.compile(memory, i, &query)?;
        Ok((started.elapsed(), dense))
    }
}

/// One row: recall of pgvector's dense list against the embedded exact scan, which index
/// served it, and both stores' compile latency, without a filter or with the as-of filter.
fn measure_row(
    audit: &PgAudit<'_>,
    compiles: &PgCompiles<'_>,
    [pg, exact]: [&Memory; 2],
    filtered: bool,
    (ingest_embedded, ingest_pg): (Duration, Duration),
) -> anyhow::Result<PgRow> {
    let as_of = filtered.then(|| as_of_time(audit.turns, audit.as_of_fraction));
    let admitted = audit
        .turns
        .iter()
        .filter(|e| as_of.is_none_or(|t| e.turn.time.utc_micros() <= t.utc_micros()))
        .count();
    let started = Instant::now();
    compiles.timed(pg, 0, as_of)?;
    let first_compile = (!filtered).then(|| started.elapsed());
    compiles.timed(exact, 0, as_of)?;
    wait_for_counts(pg)?;
    wait_for_counts(exact)?;

    let mut recall_sum = 0.0;
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for (i, vector) in compiles.vectors.iter().enumerate() {
        let query = compiles.query(i, as_of);
        let truth = exact.dense_candidates(&query, &vector.vector, RECALL_AT)?;
        let found = pg.dense_candidates(&query, &vector.vector, RECALL_AT)?;
        let hit = found.hits.iter().filter(|h| truth.hits.iter().any(|t| t.key == h.key)).count();
        recall_sum += hit as f64 / truth.hits.len().max(1) as f64;
        *served.entry(found.index.to_string()).or_default() += 1;
    }
    let mut row = PgRow {
        vectors: audit.vectors,
        admitted: format!("{:.1}%", 100.0 * admitted as f64 / audit.turns.len() as f64),
        recall: recall_sum / compiles.vectors.len() as f64,
        served: served.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", "),
        ingest_embedded,
        ingest_pg,
        first_compile,
        compile_embedded: Vec::new(),
        compile_pg: Vec::new(),
        dense_embedded: Vec::new(),
        dense_pg: Vec::new(),
    };
    for i in 0..compiles.vectors.len() {
        let (total, dense) = compiles.timed(exact, i, as_of)?;
        row.compile_embedded.push(total);
        row.dense_embedded.push(dense);
        let (total, dense) = compiles.timed(pg, i, as_of)?;
        row.compile_pg.push(total);
        row.dense_pg.push(dense);
    }
    Ok(row)
}

/// The unfiltered questions on 1, 2 and 4 threads, through the pool and then through one
/// connection (`pool_max=1`, the pool's anchor): the same database, derived directory and
/// questions; and the embedded exact scan on as many threads.
fn measure_throughput(
    audit: &PgAudit<'_>,
    compiles: &PgCompiles<'_>,
    pg: Memory,
    exact: &Memory,
    url: &str,
    derived: &Path,
) -> anyhow::Result<Vec<PgThroughput>> {
    let unfiltered = |memory: &Memory, i: usize| -> anyhow::Result<()> {
        compiles.compile(memory, i, &compiles.query(i, None))?;
        Ok(())
    };
    const THREADS: [usize; 3] = [1, 2, 4];
    let mut pooled = Vec::new();
    for threads in THREADS {
        pooled.push(compiles_per_second(&pg, threads, audit.questions.len(), &unfiltered)?);
    }
    drop(pg);
    let sep = if url.contains('?') { '&' } else { '?' };
    let single = Memory::builder(format!("{url}{sep}pool_max=1"))
        .derived_dir(derived)
        .encoder(Arc::clone(audit.encoder))
        .index_cache_bytes(INDEX_CACHE_BYTES)
        .open()?;
    // Warmed as `pg` was by the rows: its indexes loaded, its connection made.
    for i in 0..audit.questions.len() {
        unfiltered(&single, i)?;
    }
    wait_for_counts(&single)?;
    let mut throughput = Vec::new();
    for (threads, pooled) in THREADS.into_iter().zip(pooled) {
        throughput.push(PgThroughput {
            vectors: audit.vectors,
            threads,
            single: compiles_per_second(&single, threads, audit.questions.len(), &unfiltered)?,
            pooled,
            embedded: compiles_per_second(exact, threads, audit.questions.len(), &unfiltered)?,
        });
    }
    Ok(throughput)
}

/// Compiles per second when `threads` threads share `memory`, each compiling all `questions`.
fn compiles_per_second(
    memory: &Memory,
    threads: usize,
    questions: usize,
    compile: &(dyn Fn(&Memory, usize) -> anyhow::Result<()> + Sync),
) -> anyhow::Result<f64> {
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    (0..questions).try_for_each(|i| compile(memory, (i + t) % questions))
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a compile thread panicked"))
    })?;
    Ok((threads * questions) as f64 / started.elapsed().as_secs_f64())
}

/// Appends `turns` in batches as ingest does, returning the time taken.
fn append_timed(memory: &Memory, turns: &[Turn]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for batch in turns.chunks(20_000) {
        memory.append(batch)?;
    }
    Ok(started.elapsed())
}

/// The event time admitting `fraction` of `turns`.
fn as_of_time(turns: &[Evidence], fraction: f64) -> EventTime {
    let mut times: Vec<EventTime> = turns.iter().map(|e| e.turn.time).collect();
    times.sort_unstable_by_key(|t| t.utc_micros());
    times[((times.len() as f64 * fraction) as usize).min(times.len() - 1)]
}

/// The URL of database `name` on `server`, dropped first if it exists: ingest is measured into
/// an empty ledger every run.
fn fresh_database(
    server: &str,
    name: &str,
    maintenance_work_mem_mib: Option<u64>,
) -> anyhow::Result<String> {
    let mut admin = postgres::Client::connect(server, postgres::NoTls).map_err(|e| {
        anyhow::anyhow!("connecting to {}: {e}", evicortex::redact_postgres_password(server))
    })?;
    // One statement each: neither may run inside a transaction block.
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    admin.batch_execute(&format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"))?;
    if let Some(mib) = maintenance_work_mem_mib {
        admin.batch_execute(&format!(
            "ALTER DATABASE {name} SET maintenance_work_mem = '{mib}MB'"
        ))?;
    }
    let (base, query) = server.split_once('?').map_or((server, ""), |(b, q)| (b, q));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    Ok(if query.is_empty() { format!("{base}/{name}") } else { format!("{base}/{name}?{query}") })
}
