//! The systems that run through the context compiler on the evaluation store: `evicortex`
//! (hybrid BM25 + dense, RRF), `evicortex-rerank` (the same plus the reranker seam), `bm25`
//! (lexical only) and `dense` (dense only). Each compiles every question at every budget with the
//! compiler's own exact packing; the packed items, in fused-rank order, are what gets scored.

use std::{collections::HashMap, sync::Arc, time::Instant};

use anyhow::{Context, bail};
use evicortex_compiler::{
    CompileConfig, CompileInputs, CompileQuery, Corpus, DenseConfig, DenseInput, EncoderRef,
    ReaderTokenizer, RerankConfig, Reranker, Selection, TermOverlapReranker, compile_timed,
};
use evicortex_core::{Namespace, TokenBudget, TurnId};
use evicortex_embed::Encoder;
use evicortex_lexical::{Bm25Index, Bm25Params};
use evicortex_vector::{ExactIndex, VectorError, VectorIndex, WindowedIndex};

use crate::{
    eval_question::EvalQuestion,
    eval_store::{EvalStore, event_time},
    ranking::{Ranking, RankingCorpus, TurnRef},
    systems::{EvalSystem, SystemOutput},
};

/// Builds the windowed index of a namespace from the cache's rows (several rows per turn for
/// windowed texts).
pub fn windowed_index(vectors: &evicortex::NamespaceVectors) -> Result<WindowedIndex, VectorError> {
    let mut inner = ExactIndex::new(vectors.dimension);
    let mut windows: HashMap<TurnId, u32> = HashMap::new();
    for (row, &turn) in vectors.turns.iter().enumerate() {
        let w = windows.entry(turn).or_insert(0);
        inner.insert((turn, *w), vectors.row(row))?;
        *w += 1;
    }
    if let Some(last) = vectors.turns.iter().copied().max() {
        inner.mark_covered(last)?;
    }
    Ok(WindowedIndex::new(inner))
}

/// What a compiled system needs per namespace, built once and reused by its questions.
#[derive(Debug)]
struct NamespaceInputs {
    namespace: Namespace,
    corpus: Corpus,
    lexical: Bm25Index,
    dense: Option<WindowedIndex>,
    records: HashMap<TurnId, TurnRef>,
}

/// A system that compiles with the context compiler.
pub struct CompiledSystem {
    name: String,
    store: Arc<EvalStore>,
    encoder: Option<Arc<dyn Encoder>>,
    config: CompileConfig,
    reranker: Option<TermOverlapReranker>,
    reader: Box<dyn ReaderTokenizer>,
    current: Option<NamespaceInputs>,
}

impl std::fmt::Debug for CompiledSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSystem")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The compile configuration of each compiled system, for `candidate_limit` candidates per
/// retriever. Everything else is the compiler's stated hybrid starting point (BM25 k1 1.2,
/// b 0.75, RRF k 10, identical-text dedup, no expansion, no abstention threshold).
pub fn compiled_system_config(name: &str, candidate_limit: usize) -> Option<CompileConfig> {
    let dense = DenseConfig::On { top_n: candidate_limit };
    Some(match name {
        "evicortex" => CompileConfig::hybrid(candidate_limit, dense),
        "evicortex-rerank" => {
            let mut c = CompileConfig::hybrid(candidate_limit, dense);
            c.rerank = RerankConfig::On { depth: 16, weight: 1.0 };
            c
        }
        "bm25" => CompileConfig::hybrid(candidate_limit, DenseConfig::Off),
        "dense" => {
            let mut c = CompileConfig::hybrid(candidate_limit, dense);
            c.lexical.top_n = 0;
            c
        }
        _ => return None,
    })
}

impl CompiledSystem {
    /// A compiled system named `name` (see [`compiled_system_config`]); `encoder` is required
    /// when its configuration uses dense retrieval.
    pub fn new(
        name: &str,
        config: CompileConfig,
        store: Arc<EvalStore>,
        encoder: Option<Arc<dyn Encoder>>,
        reader_tokenizer: &str,
    ) -> anyhow::Result<CompiledSystem> {
        config.validate()?;
        if matches!(config.dense, DenseConfig::On { .. }) && encoder.is_none() {
            bail!("system {name} uses dense retrieval and needs the encoder");
        }
        let reranker =
            matches!(config.rerank, RerankConfig::On { .. }).then_some(TermOverlapReranker);
        Ok(CompiledSystem {
            name: name.to_owned(),
            store,
            encoder,
            config,
            reranker,
            reader: evicortex_compiler::reader_tokenizer(reader_tokenizer)?,
            current: None,
        })
    }

    fn inputs(&mut self, q: &EvalQuestion) -> anyhow::Result<&NamespaceInputs> {
        if self.current.as_ref().is_some_and(|c| c.namespace == q.namespace) {
            return Ok(self.current.as_ref().expect("checked above"));
        }
        let (evidence, records) = self.store.evidence(q)?;
        let mut lexical =
            Bm25Index::new(Bm25Params { k1: self.config.lexical.k1, b: self.config.lexical.b });
        for e in &evidence {
            lexical.add(e.id, &evicortex_compiler::lexical_document(&e.turn))?;
        }
        if let Some(last) = evidence.iter().map(|e| e.id).max() {
            lexical.mark_covered(last)?;
        }
        let dense = match (&self.encoder, self.config.dense) {
            (Some(encoder), DenseConfig::On { .. }) => {
                let vectors =
                    self.store.cache.namespace_vectors(&evidence, &encoder.identity_digest())?;
                if !vectors.missing.is_empty() {
                    bail!(
                        "{} turns of {} have no vector under the encoder: run `evicortex eval ... --embed-only` first",
                        vectors.missing.len(),
                        q.namespace
                    );
                }
                Some(windowed_index(&vectors)?)
            }
            _ => None,
        };
        let corpus = Corpus::new(q.namespace.clone(), evidence, [])?;
        self.current = Some(NamespaceInputs {
            namespace: q.namespace.clone(),
            corpus,
            lexical,
            dense,
            records,
        });
        Ok(self.current.as_ref().expect("just set"))
    }
}

impl EvalSystem for CompiledSystem {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(
        &mut self,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        let prepare_start = Instant::now();
        self.inputs(q)?;
        let prepare = prepare_start.elapsed();
        let embed_start = Instant::now();
        let query_vector = match (&self.encoder, self.config.dense) {
            (Some(encoder), DenseConfig::On { .. }) => {
                let e = encoder
                    .embed_query(&q.query)
                    .with_context(|| format!("embedding the query of {}", q.id))?;
                // A query over the limit is windowed; its first window stands for it.
                Some(e.windows[0].vector.clone())
            }
            _ => None,
        };
        let embed = embed_start.elapsed();
        let encoder_ref = self.encoder.as_ref().map(|e| EncoderRef {
            model: e.identity().model.clone(),
            identity_digest: e.identity_digest().to_hex(),
        });
        let inputs = self.current.as_ref().expect("prepared above");
        let reranker: Option<&dyn Reranker> = self.reranker.as_ref().map(|r| r as &dyn Reranker);
        let dense = match (&inputs.dense, &query_vector, &encoder_ref) {
            (Some(index), Some(v), Some(encoder)) => {
                Some(DenseInput { index, query_vector: v, encoder })
            }
            _ => None,
        };
        let compile_inputs = CompileInputs {
            corpus: &inputs.corpus,
            lexical: &inputs.lexical,
            dense,
            reader: self.reader.as_ref(),
            reranker,
        };
        let mut outputs = Vec::with_capacity(budgets.len());
        for &budget in budgets {
            // "No budget" compiles with a budget no haystack reaches, so every candidate is packed.
            let budget = TokenBudget::new(budget.map_or(u32::MAX, |b| b as u32));
            let query = CompileQuery {
                namespace: q.namespace.clone(),
                question: q.query.clone(),
                as_of: q.as_of.map(event_time),
                budget,
            };
            let (context, timings) = compile_timed(&compile_inputs, &query, &self.config)
                .with_context(|| format!("compiling {}", q.id))?;
            let fused_rank: HashMap<TurnId, u32> =
                context.items.iter().filter_map(|i| Some((i.record, i.fused_rank?))).collect();
            let mut items: Vec<(u32, bool, u32, TurnRef)> = Vec::with_capacity(context.items.len());
            for (i, item) in context.items.iter().enumerate() {
                let at = *inputs
                    .records
                    .get(&item.record)
                    .with_context(|| format!("record {} unknown", item.record))?;
                // Fused candidates in fused-rank order, each followed by its expansions in the
                // order packed; an expansion's rank is its seed's.
                let rank = match &item.selected_by {
                    Selection::Candidate => (item.fused_rank.unwrap_or(u32::MAX), false),
                    Selection::Expansion { of } => {
                        (fused_rank.get(of).copied().unwrap_or(u32::MAX), true)
                    }
                };
                items.push((rank.0, rank.1, i as u32, at));
            }
            items.sort();
            outputs.push(SystemOutput {
                ranking: Ranking {
                    turns: items.into_iter().map(|(_, _, _, at)| at).collect(),
                    sessions: None,
                    corpus: RankingCorpus::AllTurns,
                },
                tokens_used: context.tokens_used as usize,
                abstained: Some(context.abstain),
                support: context.support,
                stages: vec![
                    ("prepare", prepare),
                    ("query_embed", embed),
                    ("lexical", timings.lexical),
                    ("dense", timings.dense),
                    ("fuse", timings.fuse),
                    ("pack", timings.pack),
                ],
            });
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use evicortex_vector::VectorIndexRead;

    use super::*;

    #[test]
    fn windowed_index_scores_a_turn_by_its_best_window_and_returns_each_turn_once() {
        let t = TurnId::from_raw;
        let vectors = evicortex::NamespaceVectors {
            identity: evicortex_embed::EncoderIdentityDigest::from_bytes([0; 32]),
            dimension: 2,
            turns: vec![t(1), t(1), t(2), t(3)],
            data: vec![0.0, 1.0, 1.0, 0.0, 0.6, 0.8, -1.0, 0.0],
            missing: vec![],
        };
        let index = windowed_index(&vectors).unwrap();
        assert_eq!(index.covers(), Some(t(3)));
        let hits = index.search(&[1.0, 0.0], 10, &mut |_| true).unwrap();
        let keys: Vec<TurnId> = hits.iter().map(|h| h.key).collect();
        assert_eq!(keys, vec![t(1), t(2), t(3)]);
        assert!((hits[0].score - 1.0).abs() < 1e-6, "turn 1 scores as its second window");
        let filtered = index.search(&[1.0, 0.0], 1, &mut |k| k != t(1)).unwrap();
        assert_eq!(filtered[0].key, t(2));
    }
}
