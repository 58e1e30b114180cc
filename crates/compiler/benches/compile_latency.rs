//! Compile latency at 1k, 10k and 100k turns in one namespace: p50 and p99 of the compiler over
//! in-memory indexes (BM25, the turn vectors and the context vectors of radius 2, as the default
//! compile ranks them), with the exact `f32` vector scan, the plain `f32` scan of the context
//! vectors and exhaustive BM25 (every matching document scored) alone as anchors measured in the
//! same run, and memory. Query embedding is not
//! part of a compile (the compiler takes a vector); it is timed apart, in its own row: the real
//! questions embedded one at a time, as queries, by the pinned encoder (`evicortex model fetch`
//! installs it; the benchmark fails without it).
//!
//! Texts and questions are real (LongMemEval S, `../shared/data/longmemeval/`, or
//! `$EVICORTEX_DATA_DIR/longmemeval/`). Turn and query vectors are synthetic (seeded, clustered,
//! 384-dimensional): embedding 100k turns on a shared CPU would take far longer than the
//! benchmark, and scan latency depends on the dimension and the score distribution, not on
//! meaning. Run: `cargo bench -p evicortex-compiler --bench compile_latency`.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use evicortex_compiler::{
    CompileConfig, CompileInputs, CompileQuery, ContextInputs, ContextVectors, Corpus, DenseConfig,
    DenseInput, EncoderRef, TiktokenReader, compile_timed,
};
use evicortex_core::{Evidence, Namespace, TokenBudget, TurnId};
use evicortex_embed::{Encoder, EncoderConfig, FETCH_COMMAND, Overlength, load_pinned_minilm};
use evicortex_lexical::{Bm25Index, Bm25Params, analyze};
use evicortex_vector::{ExactIndex, VectorIndex};
use rand::{Rng, SeedableRng, rngs::StdRng};

#[path = "support/longmemeval.rs"]
mod longmemeval;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const DIM: usize = 384;
const QUERIES: usize = 200;
const TOP_N: usize = 50;
const BUDGET: u32 = 2_000;
/// The default compile's context-vector radius.
const CONTEXT_RADIUS: u32 = 2;

fn main() {
    let path = longmemeval::data_file();
    let started = Instant::now();
    let (evidence, questions) = longmemeval::load(&path, SIZES[SIZES.len() - 1]);
    assert_eq!(evidence.len(), SIZES[SIZES.len() - 1], "the benchmark needs 100k turns");
    eprintln!(
        "loaded {} turns and {} questions in {:.1?}",
        evidence.len(),
        questions.len(),
        started.elapsed()
    );

    let (embed_p50, embed_p99) = time_query_embedding(&questions[..QUERIES]);
    let reader = TiktokenReader::o200k_base();
    let mut config = CompileConfig::hybrid(TOP_N, DenseConfig::On { top_n: TOP_N });
    config.abstention.threshold = None;
    config.context.dense_radius = CONTEXT_RADIUS;
    let encoder_ref = EncoderRef { model: "synthetic-384".into(), identity_digest: "0".repeat(64) };
    let namespace = Namespace::new("bench").expect("valid");
    let mut rng = StdRng::seed_from_u64(42);
    let centers: Vec<Vec<f32>> =
        (0..64).map(|_| (0..DIM).map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
    let synthetic = |rng: &mut StdRng| -> Vec<f32> {
        let c = &centers[rng.random_range(0..centers.len())];
        c.iter().map(|x| x + rng.random_range(-0.6..0.6)).collect()
    };
    let query_vectors: Vec<Vec<f32>> = (0..QUERIES).map(|_| synthetic(&mut rng)).collect();

    println!(
        "| turns | compile p50 | compile p99 | lexical p50 | dense p50 | fuse p50 | pack p50 | anchor: f32 scan p50 | anchor: BM25 p50 | compile / f32 scan | context list p50 | anchor: context f32 scan p50 | context list / anchor | index heap | RSS after build |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &SIZES {
        let rss_before = rss_kib("VmRSS");
        let records: Vec<Evidence> = evidence[..n].to_vec();
        let mut lexical = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
        let mut dense = ExactIndex::new(DIM);
        let mut turn_vectors: HashMap<TurnId, Vec<f32>> = HashMap::with_capacity(n);
        for e in &records {
            lexical.add(e.id, &evicortex_compiler::turn_document(&e.turn)).expect("unique ids");
            let vector = synthetic(&mut rng);
            dense.insert(e.id, &vector).expect("valid vector");
            let unit = dense.get(e.id).expect("just inserted").to_vec();
            turn_vectors.insert(e.id, unit);
        }
        let corpus = Corpus::new(namespace.clone(), records, []).expect("valid corpus");
        let context_vectors =
            ContextVectors::build(&corpus, CONTEXT_RADIUS, DIM, turn_vectors.len(), |id| {
                turn_vectors.get(&id).map(Vec::as_slice)
            });
        drop(turn_vectors);
        let rss_after = rss_kib("VmRSS");

        let mut total = Vec::new();
        let mut stages = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut items = 0usize;
        // One warm-up pass fills the text-token cache as a long-running process would have it.
        for pass in 0..2 {
            for (i, question) in questions.iter().take(QUERIES).enumerate() {
                let inputs = CompileInputs {
                    corpus: &corpus,
                    lexical: &lexical,
                    dense: Some(DenseInput {
                        index: &dense,
                        query_vector: &query_vectors[i],
                        encoder: &encoder_ref,
                        pending: 0,
                    }),
                    also_dense: &[],
                    context: ContextInputs { lexical: None, dense: Some(&context_vectors) },
                    reader: &reader,
                    reranker: None,
                };
                let query = CompileQuery {
                    namespace: namespace.clone(),
                    question: question.clone(),
                    as_of: None,
                    budget: TokenBudget::new(BUDGET),
                };
                let t = Instant::now();
                let (context, timings) = compile_timed(&inputs, &query, &config).expect("compiles");
                let elapsed = t.elapsed();
                assert!(context.tokens_used <= BUDGET);
                if pass == 1 {
                    items += context.items.len();
                    total.push(elapsed);
                    stages[0].push(timings.lexical);
                    stages[1].push(timings.dense);
                    stages[2].push(timings.fuse);
                    stages[3].push(timings.pack);
                }
            }
        }
        assert!(items > 0, "the benchmark packed nothing");
        let mut anchor_scan = Vec::new();
        let mut anchor_bm25 = Vec::new();
        let mut context_list = Vec::new();
        let mut anchor_context = Vec::new();
        for (i, question) in questions.iter().take(QUERIES).enumerate() {
            let t = Instant::now();
            let fast = context_vectors.search(&query_vectors[i], TOP_N, |_| true).expect("search");
            context_list.push(t.elapsed());
            let t = Instant::now();
            let plain =
                context_vectors.search_f32_scan(&query_vectors[i], TOP_N, |_| true).expect("scan");
            anchor_context.push(t.elapsed());
            assert_eq!(fast, plain, "the context list must equal its f32 scan");
            let t = Instant::now();
            let hits =
                dense.search_f32_scan(&query_vectors[i], TOP_N, &mut |_| true).expect("scan");
            anchor_scan.push(t.elapsed());
            assert_eq!(hits.len(), TOP_N.min(n));
            let t = Instant::now();
            let hits = lexical.search_exhaustive(&analyze(question), TOP_N, |_| true);
            anchor_bm25.push(t.elapsed());
            std::hint::black_box(hits);
        }
        let p50 = percentile(&mut total, 0.50);
        let scan = percentile(&mut anchor_scan, 0.50);
        let (context_p50, context_anchor) =
            (percentile(&mut context_list, 0.50), percentile(&mut anchor_context, 0.50));
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {:.1} MiB | {:.1} MiB (+{:.1}) |",
            ms(p50),
            ms(percentile(&mut total, 0.99)),
            ms(percentile(&mut stages[0], 0.5)),
            ms(percentile(&mut stages[1], 0.5)),
            ms(percentile(&mut stages[2], 0.5)),
            ms(percentile(&mut stages[3], 0.5)),
            ms(scan),
            ms(percentile(&mut anchor_bm25, 0.5)),
            p50.as_secs_f64() / scan.as_secs_f64(),
            ms(context_p50),
            ms(context_anchor),
            context_p50.as_secs_f64() / context_anchor.as_secs_f64(),
            (dense.heap_bytes() + context_vectors.heap_bytes()) as f64 / 1048576.0,
            rss_after as f64 / 1024.0,
            (rss_after - rss_before) as f64 / 1024.0,
        );
    }
    println!(
        "| query embedding, 1 question per call (not in compile) | {} | {} | – | – | – | – | – | – | – | – | – | – | – | – |",
        ms(embed_p50),
        ms(embed_p99),
    );
    println!("\npeak RSS (VmHWM) of the whole run: {:.1} MiB", rss_kib("VmHWM") as f64 / 1024.0);
    println!(
        "config: top_n {TOP_N} per retriever, context vectors of radius {CONTEXT_RADIUS}, RRF k 10, reranker off, budget {BUDGET} o200k_base tokens, {QUERIES} LongMemEval questions, dim {DIM}"
    );
}

/// p50 and p99 of embedding each question alone as a query with the pinned encoder, after one
/// warm-up pass. The encoder is dropped before the indexes are built.
fn time_query_embedding(questions: &[String]) -> (Duration, Duration) {
    let config = EncoderConfig::all_minilm_l6_v2().with_overlength(Overlength::Refuse);
    let encoder = load_pinned_minilm(config).unwrap_or_else(|e| {
        panic!("the benchmark times query embedding with the pinned encoder: {e}; run `{FETCH_COMMAND}`")
    });
    let mut samples = Vec::with_capacity(questions.len());
    for pass in 0..2 {
        for (i, question) in questions.iter().enumerate() {
            let t = Instant::now();
            let embedding = encoder
                .embed_query(question)
                .unwrap_or_else(|e| panic!("embedding question {i} ({question:?}): {e}"));
            let elapsed = t.elapsed();
            assert!(embedding.single().is_some_and(|v| v.len() == DIM), "question {i}: one vector");
            if pass == 1 {
                samples.push(elapsed);
            }
        }
    }
    (percentile(&mut samples, 0.50), percentile(&mut samples, 0.99))
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn rss_kib(field: &str) -> u64 {
    let status = fs_err::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)
                .and_then(|v| v.trim_start_matches(':').split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}
