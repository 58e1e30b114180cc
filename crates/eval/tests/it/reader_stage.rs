//! The reader stage on the real dev files with the real smallest reader (a few tokens per
//! answer): every system's packed context is read, answers are scored and cached, and a rerun
//! resumes from the cache.

use std::{path::Path, sync::Arc};

use evicortex_eval::{
    eval_store::EvalStore,
    reader_stage::{JudgeSetting, ReaderStageSpec, export_answers, import_answers},
    runner::{Benchmark, RunSpec, prepare_store, run, stratified},
    split::SplitName,
};

use crate::data_file;

const TEST_READER: &str = "smollm2-135m-instruct-q4_1";

/// A run of `questions` stratified questions of `dataset` through the no-memory and oracle systems at 256
/// tokens, read by the test reader with its answers cached in `dir`; and its store.
fn stratified_run(
    dir: &Path,
    benchmark: Benchmark,
    dataset: &str,
    split: SplitName,
    questions: usize,
) -> (RunSpec, Arc<EvalStore>) {
    let spec = RunSpec {
        split,
        split_file: (benchmark == Benchmark::LongMemEval)
            .then(|| data_file("longmemeval/split.tsv")),
        systems: ["no-memory", "oracle"].map(String::from).to_vec(),
        budgets: vec![Some(256)],
        cutoffs: vec![1, 5],
        stratified: Some(questions),
        reader: Some(ReaderStageSpec {
            reader: TEST_READER.to_owned(),
            judge: JudgeSetting::Reader,
            max_new_tokens: 4,
            cache: dir.join("answers.sqlite"),
        }),
        ..RunSpec::new(benchmark, data_file(dataset))
    };
    let (store, _, _) = prepare_store(&spec, &dir.join("store"), Vec::new(), None).unwrap();
    (spec, Arc::new(store))
}

#[test]
fn locomo_answers_are_scored_per_category_and_resume_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (s, store) = stratified_run(
        dir.path(),
        Benchmark::Locomo,
        "locomo/locomo10.dev.json",
        SplitName::All,
        5,
    );
    let first = run(&s, Some(store.clone()), &mut |_, _| Ok(None)).unwrap();
    for system in ["no-memory", "oracle"] {
        let summary = &first.answers[system]["256"];
        assert_eq!(summary.overall.n, 5, "{system}");
        assert_eq!(summary.by_kind.len(), 5, "one question per category: {:?}", summary.by_kind);
        let f1 = summary.overall.f1.expect("LoCoMo answers get F1");
        assert!((0.0..=1.0).contains(&f1), "{f1}");
        assert!(summary.overall.judge_accuracy.is_none(), "LoCoMo has no judge");
        assert!(summary.overall.generated_tokens <= 4.0);
    }
    // The oracle's prompt holds its evidence; the no-memory prompt holds none.
    let prompt = |system: &str| first.answers[system]["256"].overall.prompt_tokens;
    assert!(
        prompt("oracle") > prompt("no-memory") + 20.0,
        "{} {}",
        prompt("oracle"),
        prompt("no-memory")
    );
    let tokenizer = first.reader.as_ref().unwrap()["reader_tokenizer"].as_str().unwrap().to_owned();
    assert!(
        first.notes.iter().any(|n| n.contains(&format!("counted exactly in the {tokenizer}"))),
        "budgets are counted in the reader's own tokenizer: {:?}",
        first.notes
    );
    assert!(first.outcomes.iter().all(|o| o.answer.as_ref().is_some_and(|a| !a.cached)));
    let markdown = first.markdown(&s.cutoffs);
    assert!(markdown.contains("## Answers read by smollm2-135m-instruct-q4_1"), "{markdown}");

    let second = run(&s, Some(store), &mut |_, _| Ok(None)).unwrap();
    for (a, b) in first.outcomes.iter().zip(&second.outcomes) {
        let (a, b) = (a.answer.as_ref().unwrap(), b.answer.as_ref().unwrap());
        assert!(b.cached, "a rerun reads from the cache");
        assert_eq!((&a.text, a.f1, a.prompt_tokens), (&b.text, b.f1, b.prompt_tokens));
    }

    // The cache travels as text to a machine whose store does not exist yet.
    let file = dir.path().join("answers.jsonl");
    let exported = export_answers(&dir.path().join("answers.sqlite"), &file).unwrap();
    assert!(exported > 0);
    let elsewhere = dir.path().join("elsewhere/store/answers.sqlite");
    assert_eq!(import_answers(&elsewhere, &file).unwrap(), exported);
    let again = dir.path().join("again.jsonl");
    assert_eq!(export_answers(&elsewhere, &again).unwrap(), exported);
}

#[test]
fn longmemeval_answers_are_judged_with_the_released_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let (s, store) = stratified_run(
        dir.path(),
        Benchmark::LongMemEval,
        "longmemeval/longmemeval_oracle.json.gz",
        SplitName::Dev,
        2,
    );
    let report = run(&s, Some(store), &mut |_, _| Ok(None)).unwrap();
    for outcome in &report.outcomes {
        let answer = outcome.answer.as_ref().expect("every question read");
        assert!(answer.judge_correct.is_some() && answer.judge_reply.is_some(), "{answer:?}");
        assert!(answer.f1.is_none());
    }
    let summary = &report.answers["oracle"]["256"].overall;
    assert_eq!(summary.n, 2);
    assert!(summary.judge_accuracy.is_some());
}

#[test]
fn stratified_subsets_take_kinds_in_turn_and_keep_file_order() {
    let s = RunSpec::new(Benchmark::Locomo, data_file("locomo/locomo10.dev.json"));
    let (_, _, questions, _, _) = evicortex_eval::runner::load_questions(&s).unwrap();
    let ids: Vec<String> = questions.iter().map(|q| q.id.clone()).collect();
    let picked = stratified(questions, 12);
    assert_eq!(picked.len(), 12);
    let mut per_kind = std::collections::BTreeMap::<String, usize>::new();
    for q in &picked {
        *per_kind.entry(q.kind.clone()).or_default() += 1;
    }
    assert_eq!(per_kind.len(), 5, "{per_kind:?}");
    assert!(per_kind.values().all(|&n| n == 2 || n == 3), "{per_kind:?}");
    let positions: Vec<usize> =
        picked.iter().map(|q| ids.iter().position(|id| *id == q.id).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "file order kept");
}
