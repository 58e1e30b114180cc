//! The systems that run through the product's own compile path, `Memory::compile` (the function
//! behind `evicortex compile`, HTTP and MCP): `evicortex` (hybrid BM25 + dense, RRF),
//! `evicortex-rerank` (the same plus the reranker seam), `bm25` (lexical only) and `dense` (dense
//! only), and the named variants of a run configuration. Each compiles every question at every
//! budget; the packed items, in fused-rank order, are what gets scored.

use std::{collections::HashMap, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use evicortex::{
    CompileConfig, CompileQuery, CompileRequest, DenseConfig, ReaderTokenizer, RerankConfig,
    Selection, TokenBudget, TurnId,
};

use crate::{
    eval_question::EvalQuestion,
    eval_store::{EvalStore, RecordsCache, event_time},
    ranking::{Ranking, RankingCorpus, TurnRef},
    systems::{EvalSystem, SystemOutput},
};

/// A system that compiles with the product's compile path.
pub struct CompiledSystem {
    name: String,
    store: Arc<EvalStore>,
    config: CompileConfig,
    reader: Arc<dyn ReaderTokenizer>,
    records: RecordsCache,
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
/// retriever: `evicortex` is the compiler's committed default (`CompileConfig::default_with`,
/// what `evicortex compile` runs with its default flags and `--top-n <candidate_limit>`, and the
/// servers' default); `bm25` and `dense` are its single retrievers on the hybrid starting point
/// (no context, names or time lists, plain analyzer, fused order), the controls they always were.
pub fn compiled_system_config(name: &str, candidate_limit: usize) -> Option<CompileConfig> {
    let dense = DenseConfig::On { top_n: candidate_limit };
    Some(match name {
        "evicortex" => CompileConfig::default_with(candidate_limit, dense),
        "evicortex-rerank" => {
            let mut c = CompileConfig::default_with(candidate_limit, dense);
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
    /// A compiled system named `name` with `config`, over `store` (whose memory must have the
    /// encoder when the configuration uses dense retrieval).
    pub fn new(
        name: &str,
        config: CompileConfig,
        store: Arc<EvalStore>,
        reader: Arc<dyn ReaderTokenizer>,
    ) -> anyhow::Result<CompiledSystem> {
        config.validate()?;
        if matches!(config.dense, DenseConfig::On { .. }) && !store.memory.has_encoder() {
            bail!("system {name} uses dense retrieval and needs the encoder");
        }
        if config.rerank != RerankConfig::Off && store.memory.reranker().is_none() {
            bail!("system {name} reranks and needs a reranker (the run's `reranker`)");
        }
        Ok(CompiledSystem {
            name: name.to_owned(),
            store,
            config,
            reader,
            records: RecordsCache::default(),
        })
    }

    /// The compile configuration.
    pub fn config(&self) -> &CompileConfig {
        &self.config
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
        let records = self.records.get(&self.store, q)?;
        let memory = &self.store.memory;
        // The question is embedded once for all budgets, by the same function compile uses.
        let embed_start = std::time::Instant::now();
        let query_vectors = match self.config.dense {
            DenseConfig::On { .. } => memory
                .embed_query_all(&q.query)
                .with_context(|| format!("embedding the query of {}", q.id))?,
            DenseConfig::Off => Vec::new(),
        };
        let embed = embed_start.elapsed();
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
            let request = CompileRequest {
                query: &query,
                config: &self.config,
                reader: self.reader.as_ref(),
                query_vectors: &query_vectors,
            };
            let report =
                memory.compile_report(&request).with_context(|| format!("compiling {}", q.id))?;
            let context = report.context;
            let fused_rank: HashMap<TurnId, u32> =
                context.items.iter().filter_map(|i| Some((i.record, i.fused_rank?))).collect();
            let mut items: Vec<(u32, bool, u32, TurnRef)> = Vec::with_capacity(context.items.len());
            for (i, item) in context.items.iter().enumerate() {
                let at = records.turn_ref(item.record)?;
                // A long turn packed as an excerpt is packed evidence only where the excerpt
                // holds the answer (crate::protocol::excerpt_holds_answer).
                if item.excerpt.is_some()
                    && !crate::protocol::excerpt_holds_answer(&q.gold.answer, &item.text)
                {
                    continue;
                }
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
            let stages: Vec<(&'static str, Duration)> = vec![
                ("prepare", report.index_refresh),
                ("query_embed", embed),
                ("lexical", report.stages.lexical),
                ("dense", report.stages.dense),
                ("fuse", report.stages.fuse),
                ("pack", report.stages.pack),
            ];
            outputs.push(SystemOutput {
                ranking: Ranking {
                    turns: items.into_iter().map(|(_, _, _, at)| at).collect(),
                    sessions: None,
                    corpus: RankingCorpus::AllTurns,
                },
                tokens_used: context.tokens_used as usize,
                abstained: Some(context.abstain),
                support: context.support,
                stages,
                text: context.text.clone(),
                compiled: Some(Box::new(context)),
            });
        }
        Ok(outputs)
    }
}
