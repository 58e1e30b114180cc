//! Evidence anywhere in the packed context, recomputed from a run's `questions.jsonl`: for runs
//! whose report predates the measure (the packed and gold turn keys are in every line).

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    io::BufRead,
};

use anyhow::Context;
use serde::Deserialize;

use crate::{
    report::{PackedRow, packed_table_markdown},
    scoring::{PackedRecall, packed_turn_recall},
};

/// The fields of a `questions.jsonl` line this needs.
#[derive(Deserialize)]
struct Line {
    system: String,
    budget: Option<usize>,
    excluded: Option<serde_json::Value>,
    gold_turns: Vec<String>,
    packed_turns: Vec<String>,
}

/// Counts of one system at one budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackedCounts {
    /// Scored questions.
    pub n: usize,
    /// Questions with every gold turn packed.
    pub turn_all: usize,
    /// Questions with at least one gold turn packed.
    pub turn_any: usize,
    /// Questions where packed evidence turns reach every gold session.
    pub session_all: usize,
}

/// (system, budget) -> counts over the scored lines of `jsonl`.
pub type PackedTable = BTreeMap<(String, Option<usize>), PackedCounts>;

/// Reads `questions.jsonl` and counts, per system and budget, the scored questions whose gold
/// evidence is in the packed context. A malformed line is an error naming its line number.
pub fn packed_from_outcomes(jsonl: impl BufRead) -> anyhow::Result<PackedTable> {
    let mut table = PackedTable::new();
    for (i, line) in jsonl.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(&line).with_context(|| format!("line {}", i + 1))?;
        if l.excluded.is_some() {
            continue;
        }
        let packed: Vec<&str> = l.packed_turns.iter().map(String::as_str).collect();
        let gold: HashSet<&str> = l.gold_turns.iter().map(String::as_str).collect();
        let PackedRecall { turn: (any, all), session: (_, session_all) } =
            packed_turn_recall(&packed, &gold);
        let c = table.entry((l.system, l.budget)).or_default();
        c.n += 1;
        c.turn_all += usize::from(all);
        c.turn_any += usize::from(any);
        c.session_all += usize::from(session_all);
    }
    Ok(table)
}

/// The table as markdown, one row per system, budgets in columns.
pub fn packed_markdown(table: &PackedTable) -> String {
    let mut budgets: Vec<Option<usize>> = table.keys().map(|(_, b)| *b).collect();
    budgets.sort_by_key(|b| b.unwrap_or(usize::MAX));
    budgets.dedup();
    let systems: BTreeSet<&String> = table.keys().map(|(s, _)| s).collect();
    let rows: Vec<PackedRow> = systems
        .into_iter()
        .map(|s| {
            let counts: Vec<Option<&PackedCounts>> =
                budgets.iter().map(|b| table.get(&(s.clone(), *b)).filter(|c| c.n > 0)).collect();
            let n = counts.iter().flatten().next().map_or(0, |c| c.n);
            let cells = counts
                .into_iter()
                .map(|c| {
                    c.map(|c| {
                        let f = |x: usize| x as f64 / c.n as f64;
                        [f(c.turn_all), f(c.turn_any), f(c.session_all)]
                    })
                })
                .collect();
            PackedRow { system: s.clone(), n, cells }
        })
        .collect();
    let budgets: Vec<String> = budgets.into_iter().map(crate::report::budget_key).collect();
    packed_table_markdown(&budgets, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_scored_lines_and_names_a_malformed_line() {
        let jsonl = concat!(
            r#"{"system":"a","budget":512,"excluded":null,"gold_turns":["answer_x_1","answer_y_2"],"packed_turns":["answer_x_1","noans_y_1"]}"#,
            "\n",
            r#"{"system":"a","budget":512,"excluded":"Abstention","gold_turns":[],"packed_turns":[]}"#,
            "\n",
            r#"{"system":"a","budget":512,"excluded":null,"gold_turns":["answer_x_1"],"packed_turns":["s_0","answer_x_1"]}"#,
            "\n",
        );
        let t = packed_from_outcomes(jsonl.as_bytes()).unwrap();
        let c = t[&("a".to_owned(), Some(512))];
        assert_eq!(c, PackedCounts { n: 2, turn_all: 1, turn_any: 2, session_all: 1 });
        assert!(packed_markdown(&t).contains("| a | 2 | 0.5000 | 1.0000 | 0.5000 |"));
        let err = packed_from_outcomes("{}\n{\"system\":1}".as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }
}
