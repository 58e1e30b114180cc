//! The report rendered for people: `report.md`'s tables (per level and budget, per question
//! type, evidence anywhere in the packed context) and an SVG plot of a metric against budget.

use std::fmt::Write as _;

use super::{Report, budget_key};
use crate::scoring::{Level, MetricTable, PACKED};

/// One system's row of the packed-context table: per budget, turn all, turn any and session
/// all (`None`: not measured at that budget).
#[derive(Clone, Debug)]
pub struct PackedRow {
    /// The system.
    pub system: String,
    /// Scored questions.
    pub n: usize,
    /// Per budget, in the table's column order.
    pub cells: Vec<Option<[f64; 3]>>,
}

/// The packed-context table as markdown, budgets in columns.
pub fn packed_table_markdown(budgets: &[String], rows: &[PackedRow]) -> String {
    let mut md = "| system | n |".to_owned();
    let mut rule = "| --- | --- |".to_owned();
    for b in budgets {
        let _ = write!(md, " turn all ({b}) | turn any ({b}) | session all ({b}) |");
        rule.push_str(" --- | --- | --- |");
    }
    let _ = writeln!(md, "\n{rule}");
    for r in rows {
        let _ = write!(md, "| {} | {} |", r.system, r.n);
        for cell in &r.cells {
            match cell {
                Some([a, b, c]) => {
                    let _ = write!(md, " {a:.4} | {b:.4} | {c:.4} |");
                }
                None => md.push_str(" - | - | - |"),
            }
        }
        md.push('\n');
    }
    md
}

impl Report {
    /// The human-readable summary.
    pub fn markdown(&self, cutoffs: &[usize]) -> String {
        let mut md = String::new();
        let d = &self.dataset;
        let _ = writeln!(md, "# {} evaluation\n", self.benchmark);
        let _ = writeln!(
            md,
            "Dataset `{}`: {} (sha256 `{}`{}).\n",
            d.path.display(),
            d.name,
            d.sha256,
            if d.official { ", official" } else { ", NOT an official artifact" }
        );
        let q = &self.questions;
        let _ = writeln!(
            md,
            "Questions: {} selected, {} scored, {} abstention cases (reported separately), {} without evidence.\n",
            q.selected, q.scored, q.abstention, q.no_evidence
        );
        for note in &self.notes {
            let _ = writeln!(md, "- {note}");
        }
        let budgets: Vec<String> = self
            .systems
            .values()
            .next()
            .map(|s| {
                let mut b: Vec<(Option<usize>, String)> =
                    s.budgets.values().map(|r| (r.budget, budget_key(r.budget))).collect();
                b.sort_by_key(|(x, _)| x.unwrap_or(usize::MAX));
                b.into_iter().map(|(_, k)| k).collect()
            })
            .unwrap_or_default();
        for level in ["session", "turn"] {
            for budget in &budgets {
                let _ = writeln!(md, "\n## {level} level, budget {budget}\n");
                let mut header = "| system | n |".to_owned();
                let mut rule = "| --- | --- |".to_owned();
                for k in cutoffs {
                    for m in ["recall_any", "recall_all", "ndcg_any"] {
                        let _ = write!(header, " {m}@{k} |");
                        rule.push_str(" --- |");
                    }
                }
                header.push_str(" tokens mean | tokens per packed turn |");
                rule.push_str(" --- | --- |");
                let _ = writeln!(md, "{header}\n{rule}");
                for (name, sys) in &self.systems {
                    let Some(r) = sys.budgets.get(budget) else { continue };
                    let table =
                        if level == "session" { &r.overall.session } else { &r.overall.turn };
                    let mut row = format!("| {name} | {} |", r.n_scored);
                    for k in cutoffs {
                        for m in ["recall_any", "recall_all", "ndcg_any"] {
                            let v = table.get(&format!("{m}@{k}")).copied().unwrap_or(f64::NAN);
                            let _ = write!(row, " {v:.4} |");
                        }
                    }
                    let _ = write!(
                        row,
                        " {:.0} | {:.1} |",
                        r.tokens_used.mean, r.tokens_used.per_packed_turn
                    );
                    let _ = writeln!(md, "{row}");
                }
            }
        }
        self.packed_section(&mut md, &budgets);
        crate::reader_stage::answers_markdown(self, cutoffs, &mut md);
        let numeric: Vec<usize> = budgets.iter().filter_map(|b| b.parse().ok()).collect();
        if numeric.len() >= 2
            && let Some(&k) = cutoffs.iter().max()
        {
            let metric = format!("recall_all@{k}");
            let _ = writeln!(md, "\n## Session {metric} against budget\n");
            let _ = writeln!(md, "{}", self.svg_plot(&numeric, Level::Session, &metric));
            let metric = format!("recall_all@{PACKED}");
            let _ = writeln!(md, "\n## Turn {metric} against budget\n");
            let _ = writeln!(md, "{}", self.svg_plot(&numeric, Level::Turn, &metric));
        }
        self.by_type_section(&mut md, &budgets, cutoffs);
        let _ = writeln!(md, "\n## Abstention cases and latency\n");
        let _ = writeln!(
            md,
            "| system | budget | abstention n | abstained | abstained on answerable | mean tokens on abstention | threshold fitted on this split for balanced accuracy: t (acc., caught, false abst.) | highest threshold with at most 5% false abstention: t (caught) [95% bootstrap interval of t] | stages (mean ms) |"
        );
        let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        for (name, sys) in &self.systems {
            for b in &budgets {
                let Some(r) = sys.budgets.get(b) else { continue };
                let stages: Vec<String> =
                    r.latency_ms.iter().map(|(s, l)| format!("{s} {:.1}", l.mean)).collect();
                let opt = |o: Option<usize>| {
                    o.map_or_else(|| "never abstains".to_owned(), |v| v.to_string())
                };
                let _ = writeln!(
                    md,
                    "| {name} | {b} | {} | {} | {} | {:.0} | {} | {} | {} |",
                    r.abstention.n,
                    opt(r.abstention.abstained),
                    opt(r.abstention.abstained_on_answerable),
                    r.abstention.mean_tokens_used,
                    r.abstention.calibration.as_ref().map_or_else(
                        || "-".to_owned(),
                        |c| format!(
                            "{:.4} ({:.3}, {:.0}%, {:.0}%)",
                            c.threshold,
                            c.balanced_accuracy,
                            100.0 * c.abstention_recall,
                            100.0 * c.false_abstention
                        )
                    ),
                    r.abstention.calibration_5pct_false_abstention.as_ref().map_or_else(
                        || "-".to_owned(),
                        |c| format!(
                            "{:.6} ({:.0}%){}",
                            c.threshold,
                            100.0 * c.abstention_recall,
                            r.abstention.calibration_5pct_interval.map_or_else(
                                String::new,
                                |i| format!(" [{:.4}, {:.4}]", i.low, i.high)
                            )
                        )
                    ),
                    stages.join(", ")
                );
            }
        }
        let _ = writeln!(md, "\n## Wall time\n");
        for (what, s) in &self.wall_time_s {
            let _ = writeln!(md, "- {what}: {s:.1} s");
        }
        md
    }

    /// Per system, each question type's turn and session recall_all in the packed context and
    /// at the largest cutoff, budgets in columns.
    fn by_type_section(&self, md: &mut String, budgets: &[String], cutoffs: &[usize]) {
        let k = cutoffs.iter().max().copied().unwrap_or(10);
        let _ = writeln!(
            md,
            "\n## By question type\n\nEach cell: turn recall_all@packed / session \
             recall_all@packed / turn recall_all@{k} / session recall_all@{k}.\n"
        );
        for (name, sys) in &self.systems {
            let _ = writeln!(md, "\n### {name}\n");
            let mut header = "| type | n |".to_owned();
            let mut rule = "| --- | --- |".to_owned();
            for b in budgets {
                let _ = write!(header, " {b} |");
                rule.push_str(" --- |");
            }
            let _ = writeln!(md, "{header}\n{rule}");
            let kinds: std::collections::BTreeSet<&String> =
                sys.budgets.values().flat_map(|r| r.by_question_type.keys()).collect();
            for kind in kinds {
                let n = sys
                    .budgets
                    .values()
                    .find_map(|r| r.by_question_type.get(kind))
                    .map_or(0, |t| t.n_scored);
                let mut row = format!("| {kind} | {n} |");
                for b in budgets {
                    let Some(t) = sys.budgets.get(b).and_then(|r| r.by_question_type.get(kind))
                    else {
                        row.push_str(" - |");
                        continue;
                    };
                    let get = |table: &MetricTable, cut: &str| {
                        table.get(&format!("recall_all@{cut}")).copied().unwrap_or(f64::NAN)
                    };
                    let s = &t.scores;
                    let _ = write!(
                        row,
                        " {:.4} / {:.4} / {:.4} / {:.4} |",
                        get(&s.turn, PACKED),
                        get(&s.session, PACKED),
                        get(&s.turn, &k.to_string()),
                        get(&s.session, &k.to_string())
                    );
                }
                let _ = writeln!(md, "{row}");
            }
        }
    }

    /// The table of evidence anywhere in the packed context, whatever its rank.
    fn packed_section(&self, md: &mut String, budgets: &[String]) {
        let _ = writeln!(
            md,
            "\n## Evidence anywhere in the packed context\n\n\
             Every gold turn (`all`) or at least one (`any`) inside the packed context, whatever its \
             rank; `session all`: every gold session reached by a packed evidence turn. Cutoffs count \
             items, which favours systems whose items are larger (a chunk lists several turns); \
             this counts only what fits the budget.\n"
        );
        let rows: Vec<PackedRow> = self
            .systems
            .iter()
            .map(|(name, sys)| {
                let cells = budgets
                    .iter()
                    .map(|b| {
                        let o = &sys.budgets.get(b)?.overall;
                        let get =
                            |t: &MetricTable, m: &str| t.get(&format!("{m}@{PACKED}")).copied();
                        Some([
                            get(&o.turn, "recall_all")?,
                            get(&o.turn, "recall_any")?,
                            get(&o.session, "recall_all")?,
                        ])
                    })
                    .collect();
                let n = sys.budgets.values().next().map_or(0, |r| r.n_scored);
                PackedRow { system: name.clone(), n, cells }
            })
            .collect();
        md.push_str(&packed_table_markdown(budgets, &rows));
    }

    /// A small SVG line plot of `metric` at `level` against budget, one line per system.
    pub fn svg_plot(&self, budgets: &[usize], level: Level, metric: &str) -> String {
        const W: f64 = 560.0;
        const H: f64 = 320.0;
        const L: f64 = 50.0;
        const R: f64 = 150.0;
        const T: f64 = 20.0;
        const B: f64 = 40.0;
        const COLOURS: [&str; 10] = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf",
        ];
        let lx = |b: usize| {
            let (lo, hi) = ((budgets[0] as f64).log2(), (budgets[budgets.len() - 1] as f64).log2());
            L + ((b as f64).log2() - lo) / (hi - lo).max(1e-9) * (W - L - R)
        };
        let ly = |v: f64| T + (1.0 - v) * (H - T - B);
        let mut svg = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
        );
        let _ = write!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        for i in 0..=4 {
            let v = f64::from(i) / 4.0;
            let _ = write!(
                svg,
                r##"<line x1="{L}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{v:.2}</text>"##,
                W - R,
                L - 4.0,
                ly(v) + 4.0,
                y = ly(v)
            );
        }
        for &b in budgets {
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="middle">{b}</text>"#,
                lx(b),
                H - B + 16.0
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">budget (reader tokens, log scale)</text>"#,
            L + (W - L - R) / 2.0,
            H - 6.0
        );
        for (i, (name, sys)) in self.systems.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let points: Vec<(f64, f64)> = budgets
                .iter()
                .filter_map(|b| {
                    let overall = &sys.budgets.get(&b.to_string())?.overall;
                    let table = match level {
                        Level::Session => &overall.session,
                        Level::Turn => &overall.turn,
                    };
                    let v = table.get(metric)?;
                    Some((lx(*b), ly(*v)))
                })
                .collect();
            let path: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
            for (x, y) in &points {
                let _ = write!(svg, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#);
            }
            let ty = T + 14.0 * i as f64 + 8.0;
            let _ = write!(
                svg,
                r#"<rect x="{}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{name}</text>"#,
                W - R + 10.0,
                ty - 9.0,
                W - R + 24.0,
                ty
            );
        }
        svg.push_str("</svg>");
        svg
    }
}
