//! The tables of `serve-load`: a row per operation each interval as it ends, then the totals,
//! the stability of p99 and RSS after warm-up, and the checks.

use std::time::Duration;

use serde_json::json;

use super::{
    ServeLoadArgs,
    readback::ReadBack,
    traffic::{Op, Tally, add_tallies},
};
use crate::outln;

/// One interval's measurements.
pub struct Sample {
    /// Since the clock started, at the end of the interval.
    pub at: Duration,
    /// How long the interval was.
    pub span: Duration,
    pub tallies: [Tally; 3],
    /// Per --pid; `None` when the process was gone.
    pub rss_mib: Vec<Option<f64>>,
}

/// The resident memory of process `pid` in MiB (VmRSS of /proc/PID/status), `None` when it is
/// gone.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = fs_err::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn rate(n: u64, span: Duration) -> f64 {
    n as f64 / span.as_secs_f64().max(1e-9)
}

/// The req/s, turns/s, p50 ms, p99 ms and errors cells of a table row for `t` over `span`.
fn rate_cells(t: &Tally, span: Duration) -> String {
    format!(
        "{:.0} | {:.0} | {:.2} | {:.2} | {}",
        rate(t.requests, span),
        rate(t.turns, span),
        t.latency.quantile_ms(0.5),
        t.latency.quantile_ms(0.99),
        t.errors
    )
}

fn rss_cell(rss: &[Option<f64>]) -> String {
    if rss.is_empty() {
        return "-".to_owned();
    }
    let cells: Vec<String> =
        rss.iter().map(|r| r.map_or_else(|| "gone".to_owned(), |m| format!("{m:.0}"))).collect();
    cells.join(" / ")
}

/// The samples so far and the operations the load sends.
pub struct Report {
    active: Vec<Op>,
    pids: Vec<u32>,
    samples: Vec<Sample>,
}

impl Report {
    pub fn new(active: Vec<Op>, pids: Vec<u32>) -> Report {
        Report { active, pids, samples: Vec::new() }
    }

    pub fn header(
        &self,
        args: &ServeLoadArgs,
        servers: &[String],
        namespaces: &[String],
        run: &str,
        open_conns: usize,
    ) -> anyhow::Result<()> {
        let spread = match namespaces {
            [one] => format!("namespace {one}"),
            many => format!("{} namespaces ({}..{})", many.len(), many[0], many[many.len() - 1]),
        };
        outln!(
            "evicortex-bench serve-load: {} connections over {} server(s), {spread}, {:.0} s, \
             samples every {:.0} s; run {run}",
            args.connections,
            servers.len(),
            args.seconds,
            args.interval
        )?;
        let weights: Vec<String> = Op::ALL
            .iter()
            .zip(args.mix.weights)
            .filter(|(_, w)| *w > 0)
            .map(|(op, w)| format!("{}={w}", op.name()))
            .collect();
        let mut open = match args.append_rate {
            Some(rate) => format!(
                "; appends open-loop at {rate:.0} turns/s over {open_conns} connections (latency \
                 from when each was due), the others run the mix without appends"
            ),
            None => String::new(),
        };
        if let Some(rate) = args.erase_rate {
            open.push_str(&format!(
                "; erasures open-loop at {rate} a second over {} connections (of the oldest \
                 turn appended and not erased; latency from when each was due), the others run \
                 the mix without erasures",
                args.erase_connections
            ));
        }
        if let Some(rate) = args.compile_rate {
            open.push_str(&format!(
                "; compiles open-loop at {rate} a second over the other connections (latency \
                 from when each was due)"
            ));
        }
        outln!(
            "mix {}; {} turn(s) per append; compile budget {} (o200k_base); {} seed turns per namespace{open}",
            weights.join(","),
            args.batch,
            args.budget,
            args.seed_turns
        )?;
        outln!()?;
        outln!("| t s | op | req/s | turns/s | p50 ms | p99 ms | errors | RSS MiB |")?;
        outln!("|--:|---|--:|--:|--:|--:|--:|--:|")?;
        Ok(())
    }

    /// Prints the rows of `sample` and keeps it.
    pub fn sample(&mut self, sample: Sample) -> anyhow::Result<()> {
        let rss = rss_cell(&sample.rss_mib);
        for &op in &self.active {
            let t = &sample.tallies[op as usize];
            outln!(
                "| {:.0} | {} | {} | {rss} |",
                sample.at.as_secs_f64(),
                op.name(),
                rate_cells(t, sample.span)
            )?;
        }
        self.samples.push(sample);
        Ok(())
    }

    /// A one-line digest of `sample` for the progress spinner.
    pub fn progress_line(&self, sample: &Sample) -> String {
        let ops: Vec<String> = self
            .active
            .iter()
            .map(|&op| {
                let t = &sample.tallies[op as usize];
                format!(
                    "{} {:.0}/s p99 {:.1} ms",
                    op.name(),
                    rate(t.requests, sample.span),
                    t.latency.quantile_ms(0.99)
                )
            })
            .collect();
        format!("{:.0} s: {}", sample.at.as_secs_f64(), ops.join(", "))
    }

    /// Prints the totals, the stability and the checks.
    pub fn finish(&self, summary: &Summary, args: &ServeLoadArgs) -> anyhow::Result<()> {
        outln!()?;
        outln!("| op | requests | turns | req/s | turns/s | p50 ms | p99 ms | errors |")?;
        outln!("|---|--:|--:|--:|--:|--:|--:|--:|")?;
        for &op in &self.active {
            let t = &summary.totals[op as usize];
            outln!(
                "| {} | {} | {} | {} |",
                op.name(),
                t.requests,
                t.turns,
                rate_cells(t, summary.elapsed)
            )?;
        }
        outln!()?;
        match &summary.stability {
            None => outln!(
                "stability: not judged, fewer than {} samples after {} of warm-up",
                2,
                args.warmup_samples
            )?,
            Some(rows) => {
                outln!(
                    "| after warm-up ({} sample(s)) | first | min | max | worst change | within {:.0}% |",
                    args.warmup_samples,
                    args.tolerance_percent
                )?;
                outln!("|---|--:|--:|--:|--:|---|")?;
                for row in rows {
                    outln!(
                        "| {} | {:.2} | {:.2} | {:.2} | {:+.1}% | {} |",
                        row.series,
                        row.first,
                        row.min,
                        row.max,
                        row.worst_percent,
                        if row.within { "yes" } else { "no" }
                    )?;
                }
                outln!()?;
            }
        }
        match &summary.read_back {
            Some(r) => outln!(
                "read-back: all {} acknowledged turns stored with their text ({} erased by the load \
                 and absent; {} stored past a failed request)",
                r.stored,
                r.erased_absent,
                r.unacknowledged
            )?,
            None => outln!("read-back: FAILED (below)")?,
        }
        match summary.verify {
            Some(Some(records)) => outln!("verify: ok, {records} records (GET /v1/verify)")?,
            Some(None) => outln!("verify: not asked (the key is not an admin key)")?,
            None => outln!("verify: FAILED (below)")?,
        }
        Ok(())
    }
}

/// One stability row: a series (an operation's p99, a server's RSS) after warm-up.
pub struct Stability {
    pub series: String,
    pub first: f64,
    pub min: f64,
    pub max: f64,
    /// The change from `first` farthest from it, in percent.
    pub worst_percent: f64,
    pub within: bool,
}

/// The run's results.
pub struct Summary {
    pub totals: [Tally; 3],
    pub elapsed: Duration,
    pub stability: Option<Vec<Stability>>,
    pub read_back: Option<ReadBack>,
    pub verify: Option<Option<u64>>,
    pub servers_gone: usize,
    pub errors: Vec<String>,
    active: Vec<Op>,
    samples: Vec<serde_json::Value>,
}

impl Summary {
    pub fn new(
        report: &Report,
        read_back: Option<&ReadBack>,
        verify: Option<Option<u64>>,
        tolerance_percent: f64,
        warmup: usize,
        errors: Vec<String>,
    ) -> Summary {
        let mut totals: [Tally; 3] = Default::default();
        for sample in &report.samples {
            add_tallies(&mut totals, &sample.tallies);
        }
        let elapsed = report.samples.last().map_or(Duration::ZERO, |s| s.at);
        let after: Vec<&Sample> = report.samples.iter().skip(warmup).collect();
        let stability = (after.len() >= 2).then(|| {
            let mut series: Vec<(String, Vec<f64>)> = report
                .active
                .iter()
                .map(|&op| {
                    let p99 =
                        after.iter().map(|s| s.tallies[op as usize].latency.quantile_ms(0.99));
                    (format!("{} p99 ms", op.name()), p99.collect())
                })
                .collect();
            for (i, pid) in report.pids.iter().enumerate() {
                let rss = after.iter().map(|s| s.rss_mib[i].unwrap_or(0.0));
                series.push((format!("RSS MiB, pid {pid}"), rss.collect()));
            }
            series
                .into_iter()
                .map(|(name, values)| stability(name, &values, tolerance_percent))
                .collect()
        });
        let servers_gone = report
            .samples
            .iter()
            .map(|s| s.rss_mib.iter().filter(|r| r.is_none()).count())
            .max()
            .unwrap_or(0);
        let samples = report
            .samples
            .iter()
            .map(|s| {
                let ops: serde_json::Map<_, _> = report
                    .active
                    .iter()
                    .map(|&op| (op.name().to_owned(), tally_json(&s.tallies[op as usize], s.span)))
                    .collect();
                json!({ "t_s": s.at.as_secs_f64(), "ops": ops, "rss_mib": s.rss_mib })
            })
            .collect();
        Summary {
            totals,
            elapsed,
            stability,
            read_back: read_back.map(|r| ReadBack { ..*r }),
            verify,
            servers_gone,
            errors,
            active: report.active.clone(),
            samples,
        }
    }

    /// The summary file's content: what the scripts compare across runs.
    pub fn json(
        &self,
        args: &ServeLoadArgs,
        servers: usize,
        namespaces: usize,
    ) -> serde_json::Value {
        let ops: serde_json::Map<_, _> = self
            .active
            .iter()
            .map(|&op| (op.name().to_owned(), tally_json(&self.totals[op as usize], self.elapsed)))
            .collect();
        let stable = self.stability.as_ref().map(|rows| rows.iter().all(|r| r.within));
        let stability: Vec<_> = self
            .stability
            .iter()
            .flatten()
            .map(|r| {
                json!({"series": r.series, "first": r.first, "min": r.min, "max": r.max,
                   "worst_percent": r.worst_percent, "within": r.within})
            })
            .collect();
        json!({
            "servers": servers,
            "connections": args.connections,
            "namespaces": namespaces,
            "append_rate": args.append_rate,
            "erase_rate": args.erase_rate,
            "compile_rate": args.compile_rate,
            "seconds": self.elapsed.as_secs_f64(),
            "ops": ops,
            "errors": self.totals.iter().map(|t| t.errors).sum::<u64>(),
            "first_errors": self.errors,
            "stored": self.read_back.as_ref().map(|r| r.stored),
            "erased_absent": self.read_back.as_ref().map(|r| r.erased_absent),
            "verify_records": self.verify.flatten(),
            "stable": stable,
            "stability": stability,
            "samples": self.samples,
        })
    }
}

fn tally_json(t: &Tally, span: Duration) -> serde_json::Value {
    json!({
        "requests": t.requests,
        "turns": t.turns,
        "errors": t.errors,
        "req_per_s": rate(t.requests, span),
        "turns_per_s": rate(t.turns, span),
        "p50_ms": t.latency.quantile_ms(0.5),
        "p99_ms": t.latency.quantile_ms(0.99),
    })
}

/// Whether `values` stayed within `tolerance_percent` of the first.
fn stability(series: String, values: &[f64], tolerance_percent: f64) -> Stability {
    let first = values[0];
    let (min, max) =
        values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let change = |v: f64| {
        if first > 0.0 {
            (v - first) / first * 100.0
        } else if v > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    };
    let worst_percent = [change(min), change(max)]
        .into_iter()
        .fold(0.0, |w: f64, c| if c.abs() > w.abs() { c } else { w });
    Stability {
        series,
        first,
        min,
        max,
        worst_percent,
        within: worst_percent.abs() <= tolerance_percent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_stable_only_while_every_value_stays_within_the_tolerance_of_the_first() {
        let steady = stability("p99".into(), &[10.0, 10.9, 9.2, 10.5], 10.0);
        assert!(steady.within);
        assert!(
            (steady.worst_percent - 9.0).abs() < 1e-9 || (steady.worst_percent + 8.0).abs() < 1e-9
        );
        let grew = stability("rss".into(), &[100.0, 104.0, 111.0], 10.0);
        assert!(!grew.within);
        assert!((grew.worst_percent - 11.0).abs() < 1e-9, "{}", grew.worst_percent);
        let fell = stability("p99".into(), &[100.0, 85.0, 100.0], 10.0);
        assert!(!fell.within && fell.worst_percent < 0.0);
        assert!(!stability("p99".into(), &[0.0, 1.0], 10.0).within);
    }

    #[test]
    fn rss_is_read_for_a_live_process_and_none_for_a_gone_one() {
        let mine = rss_mib(std::process::id()).expect("this process's RSS");
        assert!(mine > 0.0);
        assert_eq!(rss_mib(u32::MAX), None);
    }
}
