//! Keeping a namespace's context indexes current after one append, window by window
//! (`WindowIndex::extend`, `ContextVectors::update`), against rebuilding them (the anchor,
//! measured in the same run), at 1k, 10k and 100k turns of one namespace.
//!
//! Texts are real (LongMemEval S turns, `../shared/data/longmemeval/` or
//! `$EVICORTEX_DATA_DIR/longmemeval/`); turn vectors are synthetic (seeded, 384-dimensional):
//! the work is summing and normalising windows, whatever the vectors mean. Each round appends the
//! next real turn to the corpus and brings both indexes up to it incrementally; the first rounds
//! also rebuild them (the anchor) and check that both search alike. Run:
//! `cargo bench -p evicortex-compiler --bench context_refresh`.

use std::{
    borrow::Cow,
    collections::HashMap,
    time::{Duration, Instant},
};

use evicortex_compiler::{ContextVectors, Corpus, WindowIndex};
use evicortex_core::{Evidence, Namespace, TurnId};
use evicortex_lexical::{Analyzer, Bm25Params};
use rand::{Rng, SeedableRng, rngs::StdRng};

#[path = "support/longmemeval.rs"]
mod longmemeval;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const ROUNDS: usize = 20;
/// Rounds whose rebuild (the anchor) is timed too: a rebuild at 100k turns takes a minute.
const ANCHOR_ROUNDS: usize = 3;
const DIM: usize = 384;
const PARAMS: Bm25Params = Bm25Params { k1: 1.2, b: 0.75 };

fn main() {
    let largest = SIZES[SIZES.len() - 1] + ROUNDS;
    let (evidence, _) = longmemeval::load(&longmemeval::data_file(), largest);
    let mut rng = StdRng::seed_from_u64(7);
    let vectors: HashMap<TurnId, Vec<f32>> = evidence
        .iter()
        .map(|e| {
            let v: Vec<f32> = (0..DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            (e.id, v.into_iter().map(|x| x / norm).collect())
        })
        .collect();
    let of = |id: TurnId| vectors.get(&id).map(Vec::as_slice);
    println!(
        "| turns | window BM25 extend p50 | rebuild p50 | ratio | context vectors update p50 | rebuild p50 | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for size in SIZES {
        let namespace = Namespace::new("bench").expect("valid");
        let mut corpus =
            Corpus::new(namespace, evidence[..size].to_vec(), []).expect("valid corpus");
        let mut window =
            WindowIndex::build(&corpus, 1, PARAMS, Analyzer::EnglishSnowball).expect("builds");
        let mut context = ContextVectors::build(&corpus, 2, DIM, corpus.len(), of);
        let (mut extend, mut rebuild, mut update, mut rebuild_vectors) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let next: Evidence = evidence[size + round].clone();
            let id = next.id;
            corpus.push(next).expect("ledger order");

            let started = Instant::now();
            window.extend(&corpus).expect("extends");
            extend.push(started.elapsed());
            let started = Instant::now();
            context.update(&corpus, [id], corpus.len(), |id| of(id).map(Cow::Borrowed));
            update.push(started.elapsed());

            if round >= ANCHOR_ROUNDS {
                continue;
            }
            let started = Instant::now();
            let built =
                WindowIndex::build(&corpus, 1, PARAMS, Analyzer::EnglishSnowball).expect("builds");
            rebuild.push(started.elapsed());
            let started = Instant::now();
            let built_vectors = ContextVectors::build(&corpus, 2, DIM, corpus.len(), of);
            rebuild_vectors.push(started.elapsed());

            if round == 0 {
                let question = "what did I say about my trip and the new job";
                let terms = built.index().analyze(question);
                assert_eq!(
                    window.index().search(&terms, 50, |_| true),
                    built.index().search(&terms, 50, |_| true),
                    "extended window index differs from a rebuild at {size}"
                );
                let query = of(id).expect("vector");
                assert_eq!(
                    context.search(query, 50, |_| true),
                    built_vectors.search(query, 50, |_| true),
                    "updated context vectors differ from a rebuild at {size}"
                );
            }
        }
        let (e, r, u, v) =
            (p50(&mut extend), p50(&mut rebuild), p50(&mut update), p50(&mut rebuild_vectors));
        println!(
            "| {size} | {} | {} | {:.0}x | {} | {} | {:.0}x |",
            ms(e),
            ms(r),
            r.as_secs_f64() / e.as_secs_f64(),
            ms(u),
            ms(v),
            v.as_secs_f64() / u.as_secs_f64()
        );
    }
    println!(
        "\n{ROUNDS} appends per size, one turn each, every one brought up to date incrementally; \
         the rebuild anchor timed after the first {ANCHOR_ROUNDS}; ratio = rebuild / incremental, \
         same run"
    );
}

fn p50(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}
