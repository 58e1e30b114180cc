use std::sync::Arc;

use evicortex_eval::{
    eval_store::EvalStore,
    runner::{Benchmark, RunSpec, prepare_store, run},
    split::SplitName,
};

use crate::data_file;

/// A fresh store holding the haystacks of `spec`'s questions (no encoder: controls only).
fn store_for(spec: &RunSpec) -> (tempfile::TempDir, Arc<EvalStore>) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _) = prepare_store(spec, dir.path(), Vec::new(), None).unwrap();
    (dir, Arc::new(store))
}

fn spec(
    benchmark: Benchmark,
    dataset: &str,
    split: SplitName,
    budgets: Vec<Option<usize>>,
) -> RunSpec {
    RunSpec {
        split,
        split_file: (benchmark == Benchmark::LongMemEval)
            .then(|| data_file("longmemeval/split.tsv")),
        systems: ["bm25-official", "no-memory", "full-history", "oracle"]
            .map(String::from)
            .to_vec(),
        budgets,
        cutoffs: vec![1, 5, 10],
        ..RunSpec::new(benchmark, data_file(dataset))
    }
}

/// The per-question outcomes `report` writes beside itself (questions.jsonl), parsed.
fn question_lines(
    report: &evicortex_eval::report::Report,
    spec: &RunSpec,
) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    report.write(dir.path(), &spec.cutoffs).unwrap();
    let text = fs_err::read_to_string(dir.path().join("questions.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn metric(
    report: &evicortex_eval::report::Report,
    system: &str,
    budget: &str,
    level: &str,
    m: &str,
) -> f64 {
    let r = &report.systems[system].budgets[budget].overall;
    if level == "session" { r.session[m] } else { r.turn[m] }
}

/// The conformance numbers again, through the runner and the benchmark-neutral question input.
#[test]
fn runner_reproduces_conformance_without_budget() {
    let report = run(
        &spec(
            Benchmark::LongMemEval,
            "longmemeval/longmemeval_s_cleaned.499of500.json.gz",
            SplitName::All,
            vec![None],
        ),
        None,
        &mut |_, _| Ok(None),
    )
    .unwrap();
    assert_eq!(report.questions.scored, 418);
    assert!(!report.dataset.official);
    let got = metric(&report, "bm25-official", "none", "session", "recall_all@5");
    assert!((got - 0.7416).abs() <= 0.005, "{got}");
    let got = metric(&report, "bm25-official", "none", "turn", "recall_all@10");
    assert!((got - 0.5909).abs() <= 0.005, "{got}");
    assert_eq!(metric(&report, "no-memory", "none", "session", "recall_any@10"), 0.0);
    assert_eq!(metric(&report, "oracle", "none", "turn", "recall_all@10"), 1.0);
}

/// With budgets: nothing is credited beyond the packed context, and no pack exceeds its budget.
#[test]
fn budgets_bound_tokens_and_credit_on_dev_subsets() {
    let mut s = spec(
        Benchmark::LongMemEval,
        "longmemeval/longmemeval_s_cleaned.499of500.json.gz",
        SplitName::Dev,
        vec![Some(512), Some(4096)],
    );
    s.max_questions = Some(12);
    let (_lme_dir, lme_store) = store_for(&s);
    let lme = run(&s, Some(lme_store), &mut |_, _| Ok(None)).unwrap();
    let locomo = spec(
        Benchmark::Locomo,
        "locomo/locomo10.dev.json",
        SplitName::All,
        vec![Some(512), Some(4096)],
    );
    let (_locomo_dir, locomo_store) = store_for(&locomo);
    let l = run(&locomo, Some(locomo_store), &mut |_, _| Ok(None)).unwrap();
    for report in [&lme, &l] {
        for (name, sys) in &report.systems {
            for (budget, r) in &sys.budgets {
                let b: usize = budget.parse().unwrap();
                assert!(r.tokens_used.max <= b, "{name} at {budget}: {}", r.tokens_used.max);
            }
            for r in sys.budgets.values() {
                for (m, v) in r.overall.session.iter().chain(&r.overall.turn) {
                    assert!((0.0..=1.0 + 1e-9).contains(v), "{name}: {m} = {v}");
                }
            }
            for (budget, r) in &sys.budgets {
                for (level, t) in [("session", &r.overall.session), ("turn", &r.overall.turn)] {
                    for m in ["recall_any", "recall_all"] {
                        let (packed, at10) = (t[&format!("{m}@packed")], t[&format!("{m}@10")]);
                        assert!(
                            packed + 1e-9 >= at10,
                            "{name} {budget} {level} {m}: {packed} < {at10}"
                        );
                    }
                }
            }
            let small = metric(report, name, "512", "turn", "recall_any@10");
            let large = metric(report, name, "4096", "turn", "recall_any@10");
            assert!(small <= large + 1e-9, "{name}: {small} at 512 > {large} at 4096");
        }
        assert_eq!(metric(report, "no-memory", "4096", "session", "recall_any@10"), 0.0);
    }
    assert_eq!(l.questions.abstention, 71);
    assert!(l.systems["oracle"].budgets["4096"].by_question_type.contains_key("multi-hop"));
    let md = l.markdown(&[1, 5, 10]);
    assert!(md.contains("<svg"), "report.md has the budget plot");
    assert!(md.contains("## Evidence anywhere in the packed context"));
    assert_eq!(metric(&l, "oracle", "512", "turn", "recall_all@packed"), 1.0);
}

/// The per-question outcomes written beside the report average to the report's figures, name the
/// packed turns by their keys, and keep excluded questions unscored.
#[test]
fn question_outcomes_add_up_to_the_report() {
    let mut s = spec(
        Benchmark::LongMemEval,
        "longmemeval/longmemeval_s_cleaned.499of500.json.gz",
        SplitName::Dev,
        vec![Some(1024)],
    );
    s.max_questions = Some(10);
    let (_store_dir, store) = store_for(&s);
    let report = run(&s, Some(store), &mut |_, _| Ok(None)).unwrap();
    let lines = question_lines(&report, &s);
    assert_eq!(lines.len(), s.systems.len() * report.questions.selected);
    for system in &s.systems {
        let mine: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["system"] == system.as_str()).collect();
        let scored: Vec<f64> = mine
            .iter()
            .filter(|l| l["excluded"].is_null())
            .map(|l| l["scores"]["session"]["recall_all@10"].as_f64().unwrap())
            .collect();
        assert_eq!(scored.len(), report.questions.scored);
        let mean = scored.iter().sum::<f64>() / scored.len() as f64;
        let reported = metric(&report, system, "1024", "session", "recall_all@10");
        assert!((mean - reported).abs() < 1e-9, "{system}: {mean} vs {reported}");
        for l in mine.iter().filter(|l| !l["excluded"].is_null()) {
            assert!(l["scores"].is_null(), "{system}: an excluded question has scores");
        }
    }
    let oracle_packs_gold = lines.iter().filter(|l| l["system"] == "oracle").all(|l| {
        let packed: Vec<&str> =
            l["packed_turns"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        l["gold_turns"].as_array().unwrap().iter().all(|g| packed.contains(&g.as_str().unwrap()))
    });
    assert!(oracle_packs_gold, "the oracle's packed turns hold every gold turn");
    for l in lines.iter().filter(|l| l["excluded"].is_null()) {
        let packed: Vec<&str> =
            l["packed_turns"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        let all = l["gold_turns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| packed.contains(&g.as_str().unwrap()));
        assert_eq!(
            l["scores"]["turn"]["recall_all@packed"].as_f64(),
            Some(f64::from(u8::from(all)))
        );
    }
}

/// A run with a system that reranks and no reranker named is refused before any work (the test
/// double never stands in), and a bad reranker or encoder name is refused at configuration time.
#[test]
fn a_reranking_system_without_a_reranker_is_refused() {
    let mut s =
        spec(Benchmark::Locomo, "locomo/locomo10.dev.json", SplitName::All, vec![Some(512)]);
    s.systems = vec!["evicortex".into(), "evicortex-rerank".into()];
    let err = evicortex_eval::runner::eval_reranker(&s).unwrap_err().to_string();
    assert!(err.contains("evicortex-rerank reranks and the run names no reranker"), "{err}");
    s.systems = vec!["evicortex".into()];
    assert!(evicortex_eval::runner::eval_reranker(&s).unwrap().is_none());
    let err = evicortex_eval::run_config::check_reranker("term-overlap").unwrap_err();
    assert!(format!("{err:#}").contains("unknown kind"), "{err:#}");
    let err = evicortex_eval::run_config::check_encoder("no-such-model").unwrap_err();
    assert!(format!("{err:#}").contains("all-mpnet-base-v2"), "{err:#}");
}

/// A single-session-assistant question's evidence is the assistant's turn: the released
/// retrieval metrics leave the question out (no user evidence turn), but the oracle still
/// hands the reader that turn, so the oracle row stays the reader's ceiling on every type.
#[test]
fn the_oracle_packs_assistant_evidence_of_questions_the_metrics_leave_out() {
    let mut s = spec(
        Benchmark::LongMemEval,
        "longmemeval/longmemeval_s_cleaned.499of500.json.gz",
        SplitName::Dev,
        vec![Some(2048)],
    );
    s.systems = vec!["oracle".to_owned()];
    s.max_per_type = Some(2);
    let (_store_dir, store) = store_for(&s);
    let report = run(&s, Some(store), &mut |_, _| Ok(None)).unwrap();
    let assistant: Vec<serde_json::Value> = question_lines(&report, &s)
        .into_iter()
        .filter(|l| l["kind"] == "single-session-assistant")
        .collect();
    assert_eq!(assistant.len(), 2);
    for l in &assistant {
        assert_eq!(l["excluded"], "no_user_evidence", "{l}");
        let packed = l["packed_turns"].as_array().unwrap();
        assert!(!packed.is_empty(), "the oracle packed nothing: {l}");
        assert!(packed.iter().all(|k| k.as_str().unwrap().starts_with("answer_")), "{l}");
    }
}
