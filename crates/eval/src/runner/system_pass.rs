//! One system's pass over the selected questions: at every budget, what it packed is costed and
//! scored (abstention cases apart), answered by the reader stage when there is one, and kept as
//! a per-question outcome.

use std::collections::BTreeMap;

use anyhow::Context;

use super::{RunSpec, progress_bar};
use crate::{
    eval_question::EvalQuestion,
    outcomes::QuestionOutcome,
    protocol::Exclusion,
    reader_stage::{AnswerSummary, ReaderStage},
    report::{BudgetAccumulator, SystemReport, budget_key},
    scoring::score_ranking,
    systems::EvalSystem,
};

/// What one system's pass adds to the report.
pub(super) struct SystemPass {
    pub(super) report: SystemReport,
    /// Answer accuracy per budget key (budgets other than none); `None` without a reader stage.
    pub(super) answers: Option<BTreeMap<String, AnswerSummary>>,
    pub(super) outcomes: Vec<QuestionOutcome>,
}

/// Runs `system` on every question of `questions` at every budget of `spec`, with a progress
/// bar on a terminal.
pub(super) fn run_system(
    system: &mut dyn EvalSystem,
    questions: &[EvalQuestion],
    spec: &RunSpec,
    stage: Option<&ReaderStage>,
) -> anyhow::Result<SystemPass> {
    let name = system.name().to_owned();
    let bar = progress_bar(questions.len() as u64, &name);
    let mut accs: Vec<BudgetAccumulator> =
        spec.budgets.iter().map(|_| BudgetAccumulator::default()).collect();
    let mut answer_accs: Vec<AnswerSummary> =
        spec.budgets.iter().map(|_| Default::default()).collect();
    let mut outcomes = Vec::new();
    for q in questions {
        let outputs = system
            .run(q, &spec.budgets)
            .with_context(|| format!("system {name} on question {}", q.id))?;
        for (((acc, out), &budget), answer_acc) in
            accs.iter_mut().zip(&outputs).zip(&spec.budgets).zip(&mut answer_accs)
        {
            acc.add_cost(out.tokens_used, out.ranking.turns.len(), &out.stages);
            if let Some(support) = out.support {
                acc.add_support(support, q.abstention);
            }
            let scores = match q.keys.exclusion {
                None => {
                    let scores = score_ranking(&q.keys, &out.ranking, &spec.cutoffs);
                    acc.add_scored(&q.kind, &scores, out.abstained);
                    Some(scores)
                }
                Some(Exclusion::Abstention) => {
                    acc.add_abstention(out.abstained, out.tokens_used);
                    None
                }
                Some(Exclusion::NoUserEvidence) => None,
            };
            let mut outcome = QuestionOutcome::new(&name, budget, q, out, scores);
            // Without a budget nothing is rendered: there is no context to read.
            if let (Some(stage), Some(_)) = (stage, budget) {
                let answer = stage
                    .answer(q, out)
                    .with_context(|| format!("system {name} on question {}", q.id))?;
                answer_acc.add(&q.kind, &answer);
                outcome.answer = Some(answer);
            }
            outcomes.push(outcome);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let budgets: BTreeMap<String, _> =
        spec.budgets.iter().zip(accs).map(|(&b, acc)| (budget_key(b), acc.finish(b))).collect();
    let primary = &budgets[&budget_key(spec.budgets[0])];
    let report = SystemReport {
        n_scored: primary.n_scored,
        overall: primary.overall.clone(),
        primary_budget: spec.budgets[0],
        budgets,
    };
    let answers = stage.is_some().then(|| {
        spec.budgets
            .iter()
            .zip(answer_accs)
            .filter(|(b, _)| b.is_some())
            .map(|(&b, acc)| (budget_key(b), acc))
            .collect()
    });
    Ok(SystemPass { report, answers, outcomes })
}
