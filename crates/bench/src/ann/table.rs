//! The tables `evicortex-bench ann run` prints: one row per size and filter for the graph or
//! the sketch, where a compile's time goes, and the PostgreSQL rows; each row ends with the
//! load average, since the machine's other work moves every latency.

use std::time::Duration;

use super::{
    audit_compile::Timed,
    graph::Outcome,
    pgvector::{PgRow, PgThroughput},
    sketch::SketchOutcome,
};
use crate::outln;

/// The header of the sketch rows ([`sketch_line`]).
pub(super) fn print_sketch_header() -> anyhow::Result<()> {
    outln!(
        "| vectors | as-of admits | recall@50 sketch vs exact | gate | packed turns also packed by the sketch | compile p50 / p99 exact | compile p50 / p99 sketch | dense p50 / p99 exact | dense p50 / p99 sketch | served by sketch | load avg |"
    )?;
    outln!("|---|---|---|---|---|---|---|---|---|---|---|")?;
    Ok(())
}

/// The header of the graph rows ([`graph_line`]).
pub(super) fn print_graph_header() -> anyhow::Result<()> {
    outln!(
        "| vectors | as-of admits | recall@50 graph vs exact | gate | packed turns also packed by the graph | first compile (read, build, write) | graph build alone | load | file MiB | compile p50 / p99 exact | compile p50 / p99 graph | compile p50 / p99 rule | dense p50 / p99 exact | dense p50 / p99 graph | dense p50 / p99 rule | rule served by graph | load avg |"
    )?;
    outln!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    Ok(())
}

/// One row of the sketch table, over `questions` compiles per memory.
pub(super) fn sketch_line(outcome: &SketchOutcome, gate: f64, questions: usize) -> String {
    format!(
        "| {} | {} | {:.4} | {} | {:.4} | {} | {} | {} | {} | {}/{} | {} |",
        outcome.rows,
        outcome.admitted,
        outcome.recall,
        pass_or_fail(outcome.recall, gate),
        outcome.packed_agreement,
        pair(&column(&outcome.exact, total)),
        pair(&column(&outcome.sketch, total)),
        pair(&column(&outcome.exact, dense)),
        pair(&column(&outcome.sketch, dense)),
        outcome.served,
        questions,
        load_average(),
    )
}

/// One row of the graph table, over `questions` compiles per memory.
pub(super) fn graph_line(outcome: &Outcome, gate: f64, questions: usize) -> String {
    format!(
        "| {} | {} | {:.4} | {} | {:.4} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {}/{} | {} |",
        outcome.rows,
        outcome.admitted,
        outcome.recall,
        pass_or_fail(outcome.recall, gate),
        outcome.packed_agreement,
        outcome.first_compile.map_or("-".to_owned(), secs),
        outcome.build.map_or("-".to_owned(), secs),
        outcome.load.map_or("-".to_owned(), secs),
        outcome.file_bytes as f64 / (1 << 20) as f64,
        pair(&column(&outcome.exact, total)),
        pair(&column(&outcome.graph, total)),
        pair(&column(&outcome.rule, total)),
        pair(&column(&outcome.exact, dense)),
        pair(&column(&outcome.graph, dense)),
        pair(&column(&outcome.rule, dense)),
        outcome.rule_graph_served,
        questions,
        load_average(),
    )
}

fn pass_or_fail(recall: f64, gate: f64) -> &'static str {
    if recall >= gate { "pass" } else { "FAIL" }
}

/// Prints the stage table, its rows made by [`stage_row`]; nothing when there are none.
pub(super) fn print_stage_table(stage_rows: &[String]) -> anyhow::Result<()> {
    if stage_rows.is_empty() {
        return Ok(());
    }
    outln!(
        "\nwhere a compile's time goes (p50 of each stage over the questions; `other` is the \
         compile's total less its stages: the facade's freshness check, the index lookup, \
         the report):"
    )?;
    outln!(
        "| vectors | as-of admits | dense path | compile | lexical | dense | fuse | pack | other |"
    )?;
    outln!("|---|---|---|---|---|---|---|---|---|")?;
    for row in stage_rows {
        outln!("{row}")?;
    }
    Ok(())
}

/// Prints the PostgreSQL rows and the concurrent compiles; nothing when there are no rows.
pub(super) fn print_pg_tables(
    pg_rows: &[PgRow],
    pg_throughput: &[PgThroughput],
    maintenance_work_mem_mib: Option<u64>,
    gate: f64,
) -> anyhow::Result<()> {
    if pg_rows.is_empty() {
        return Ok(());
    }
    outln!("\nthe same sizes on PostgreSQL (dense candidates from pgvector):")?;
    if let Some(mib) = maintenance_work_mem_mib {
        outln!("each audit database: ALTER DATABASE ... SET maintenance_work_mem = '{mib}MB'")?;
    }
    outln!("{}", PgRow::HEADER)?;
    for row in pg_rows {
        outln!("{}", row.line(gate))?;
    }
    outln!("\nconcurrent compiles on one PostgreSQL handle (unfiltered questions):")?;
    outln!("{}", PgThroughput::HEADER)?;
    for row in pg_throughput {
        outln!("{}", row.line())?;
    }
    Ok(())
}

fn total(c: &Timed) -> Duration {
    c.0
}

fn dense(c: &Timed) -> Duration {
    c.1.dense
}

/// One measure of every compile.
fn column(compiles: &[Timed], pick: fn(&Timed) -> Duration) -> Vec<Duration> {
    compiles.iter().map(pick).collect()
}

/// One line of the stage table: the p50 of each stage and of the rest.
pub(super) fn stage_row(rows: usize, admitted: &str, path: &str, compiles: &[Timed]) -> String {
    let p50 = |pick: fn(&Timed) -> Duration| {
        format!("{:.2} ms", percentile_ms(&column(compiles, pick), 0.5))
    };
    format!(
        "| {rows} | {admitted} | {path} | {} | {} | {} | {} | {} | {} |",
        p50(total),
        p50(|c| c.1.lexical),
        p50(dense),
        p50(|c| c.1.fuse),
        p50(|c| c.1.pack),
        p50(|c| c.0.saturating_sub(c.1.lexical + c.1.dense + c.1.fuse + c.1.pack)),
    )
}

pub(super) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// p50 / p99 of `times`, in milliseconds.
pub(super) fn pair(times: &[Duration]) -> String {
    format!("{:.2} / {:.2} ms", percentile_ms(times, 0.5), percentile_ms(times, 0.99))
}

/// The `p` quantile of `times` in milliseconds (nearest rank).
fn percentile_ms(times: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    ms[((ms.len() as f64 - 1.0) * p).round() as usize]
}

/// The 1-minute load average, `?` where the system does not say.
pub(super) fn load_average() -> String {
    fs_err::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
