//! The evaluation measures the product path: for real LongMemEval and LoCoMo dev questions, the
//! compiled context the evaluation scores for `evicortex` is byte for byte the one
//! `evicortex compile --json` prints on the same store with the same settings.

use std::{path::Path, sync::Arc};

use evicortex_eval::{
    compiled_systems::{CompiledSystem, compiled_system_config},
    eval_question::EvalQuestion,
    eval_store::EvalStore,
    runner::{Benchmark, RunSpec, eval_encoder, load_questions},
    split::SplitName,
    systems::EvalSystem,
};

use crate::cli::run;

/// LongMemEval S dev questions (split.tsv): a multi-session and a knowledge-update one.
const LONGMEMEVAL_DEV: [&str; 2] = ["00ca467f", "06db6396"];
/// LoCoMo dev questions: the first of each development conversation.
const LOCOMO_DEV: [&str; 2] = ["conv-26#q0", "conv-30#q0"];
/// The evaluation's candidate limit, and `evicortex compile --top-n`'s default.
const CANDIDATES: usize = evicortex::DEFAULT_TOP_N;

fn data_dir() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    evicortex_eval::data_dir(&root)
}

fn spec(benchmark: Benchmark, dataset: &str, split: SplitName) -> RunSpec {
    let data = data_dir();
    let dataset = data.join(dataset);
    assert!(
        dataset.is_file(),
        "evaluation data {} is missing; set {} to the directory holding longmemeval/ and locomo/",
        dataset.display(),
        evicortex_eval::DATA_DIR_ENV
    );
    RunSpec {
        split,
        split_file: (benchmark == Benchmark::LongMemEval)
            .then(|| data.join("longmemeval/split.tsv")),
        systems: vec!["evicortex".into()],
        budgets: vec![Some(1024)],
        cutoffs: vec![10],
        candidate_limit: CANDIDATES,
        ..RunSpec::new(benchmark, dataset)
    }
}

/// Runs the evaluation's `evicortex` system and the CLI on the same store for each question in
/// `ids`, at every budget, and compares the two contexts byte for byte.
fn check(spec: &RunSpec, ids: &[&str]) {
    let (_, _, questions, _, _) = load_questions(spec).unwrap();
    let chosen: Vec<EvalQuestion> =
        questions.into_iter().filter(|q| ids.contains(&q.id.as_str())).collect();
    assert_eq!(chosen.len(), ids.len(), "every chosen question is in the dev data");
    let dir = tempfile::tempdir().unwrap();
    let store = EvalStore::open(dir.path(), vec![eval_encoder().unwrap()], None).unwrap();
    store.ingest(&chosen).unwrap();
    store.embed(&mut |_| {}).unwrap();
    let store = Arc::new(store);
    let reader: Arc<dyn evicortex::ReaderTokenizer> =
        evicortex::reader_tokenizer("o200k_base").unwrap().into();
    let config = compiled_system_config("evicortex", CANDIDATES).unwrap();
    let mut system = CompiledSystem::new("evicortex", config, Arc::clone(&store), reader).unwrap();
    let budgets = [Some(512), Some(4096)];
    let mut evaluated = Vec::new();
    for q in &chosen {
        let outputs = system.run(q, &budgets).unwrap();
        for (budget, out) in budgets.iter().zip(outputs) {
            let context = out.compiled.expect("a compiled system returns its context");
            assert!(!context.items.is_empty(), "{}: nothing packed", q.id);
            evaluated.push((q, budget.unwrap(), context.to_json()));
        }
    }
    drop(system);
    drop(store);

    for (q, budget, evaluated) in evaluated {
        let budget = budget.to_string();
        let mut args = vec![
            "compile",
            "--namespace",
            q.namespace.as_str(),
            "--query",
            &q.query,
            "--budget",
            &budget,
            "--reader-tokenizer",
            "o200k_base",
            "--json",
        ];
        let as_of = q.as_of.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        if let Some(as_of) = &as_of {
            args.extend(["--as-of", as_of]);
        }
        let cli = run(dir.path(), &args);
        assert_eq!(cli.code, 0, "{}: {}", q.id, cli.stderr);
        assert!(
            cli.stdout.trim_end() == evaluated,
            "{} at budget {budget}: the evaluation's context differs from `evicortex compile`'s\n\
             evaluation:\n{evaluated}\ncli:\n{}",
            q.id,
            cli.stdout
        );
    }
}

#[test]
fn the_evaluation_compiles_longmemeval_dev_questions_byte_for_byte_as_the_cli_does() {
    if !crate::cli::slow_tests_enabled("longmemeval product path") {
        return;
    }
    let spec = spec(
        Benchmark::LongMemEval,
        "longmemeval/longmemeval_s_cleaned.499of500.json.gz",
        SplitName::Dev,
    );
    check(&spec, &LONGMEMEVAL_DEV);
}

#[test]
fn the_evaluation_compiles_locomo_dev_questions_byte_for_byte_as_the_cli_does() {
    let spec = spec(Benchmark::Locomo, "locomo/locomo10.dev.json", SplitName::All);
    check(&spec, &LOCOMO_DEV);
}
