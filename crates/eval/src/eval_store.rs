//! The evaluation's store: every benchmark namespace appended to a real ledger through the
//! `evicortex` facade, each turn text embedded once into the store's content-addressed cache (so
//! an interrupted run resumes where it stopped and a second run embeds nothing), and the map from
//! each question's haystack positions to the ledger records every system cites.

use std::{collections::HashMap, path::Path, sync::Arc};

use anyhow::{Context, bail};
use evicortex::{
    CatchUpLimits, EmbedProgress, EmbedReport, Encoder, EventTime, Evidence, LoadedReranker,
    Memory, Namespace, Turn, TurnId,
};

use crate::{eval_question::EvalQuestion, ranking::TurnRef};

/// A store directory holding the benchmark's namespaces.
#[derive(Debug)]
pub struct EvalStore {
    /// The memory every system reads: the product's facade, with the run's encoder (when a
    /// system needs dense retrieval) and reranker (when a system reranks).
    pub memory: Memory,
}

/// What ingest did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IngestSummary {
    /// Namespaces appended by this run.
    pub namespaces_appended: usize,
    /// Namespaces already present (checked turn for turn by count).
    pub namespaces_present: usize,
    /// Turns appended by this run.
    pub turns_appended: usize,
    /// Seconds spent.
    pub seconds: f64,
}

/// The ledger time of a benchmark timestamp (no timezone in the source: read as UTC).
pub fn event_time(t: chrono::NaiveDateTime) -> EventTime {
    EventTime::from_parts(t.and_utc().timestamp_micros(), 0)
        .expect("benchmark timestamps are in range")
}

impl EvalStore {
    /// Opens (creating) the store in `dir`, with `encoders` (the leading one first) when dense
    /// retrieval is evaluated and `reranker` when a system reranks.
    pub fn open(
        dir: &Path,
        encoders: Vec<Arc<dyn Encoder>>,
        reranker: Option<LoadedReranker>,
    ) -> anyhow::Result<EvalStore> {
        let mut builder = Memory::builder(dir);
        if let Some(reranker) = reranker {
            builder.loaded_reranker(reranker);
        }
        builder.encoders(encoders);
        let memory =
            builder.open().with_context(|| format!("opening the store {}", dir.display()))?;
        Ok(EvalStore { memory })
    }

    /// Appends the haystack of every namespace not yet in the store (one atomic batch per
    /// namespace). A namespace already present must hold exactly as many turns.
    pub fn ingest(&self, questions: &[EvalQuestion]) -> anyhow::Result<IngestSummary> {
        let start = std::time::Instant::now();
        let mut summary = IngestSummary::default();
        let mut done: std::collections::HashSet<&Namespace> = std::collections::HashSet::new();
        for q in questions {
            if !done.insert(&q.namespace) {
                continue;
            }
            let present = self.memory.evidence(&q.namespace)?;
            if !present.is_empty() {
                if present.len() != q.turns.len() {
                    bail!(
                        "namespace {} holds {} turns in the store, the dataset has {}: use a fresh --store",
                        q.namespace,
                        present.len(),
                        q.turns.len()
                    );
                }
                summary.namespaces_present += 1;
                continue;
            }
            let turns = q
                .turns
                .iter()
                .map(|t| t.stored(&q.namespace))
                .collect::<anyhow::Result<Vec<Turn>>>()?;
            self.memory
                .append(&turns)
                .with_context(|| format!("appending namespace {}", q.namespace))?;
            summary.namespaces_appended += 1;
            summary.turns_appended += turns.len();
        }
        summary.seconds = start.elapsed().as_secs_f64();
        Ok(summary)
    }

    /// Embeds every text of the store that has no vector under the encoder (resumable).
    pub fn embed(&self, progress: &mut dyn FnMut(&EmbedProgress)) -> anyhow::Result<EmbedReport> {
        Ok(self.memory.catch_up(None, CatchUpLimits::default(), progress)?)
    }

    /// The records of `q`'s namespace, by haystack position.
    pub fn records(&self, q: &EvalQuestion) -> anyhow::Result<QuestionRecords> {
        let evidence = self.memory.evidence(&q.namespace)?;
        let by_key: HashMap<(&str, usize), TurnRef> =
            q.turns.iter().map(|t| ((t.session.as_str(), t.at.turn), t.at)).collect();
        let mut by_ref = HashMap::with_capacity(evidence.len());
        let mut by_record = HashMap::with_capacity(evidence.len());
        for (i, e) in evidence.iter().enumerate() {
            let at =
                by_key.get(&(e.turn.session.as_str(), e.turn.turn.raw() as usize)).with_context(
                    || format!("record {} of {} is not in the dataset", e.id, q.namespace),
                )?;
            by_ref.insert(*at, i);
            by_record.insert(e.id, *at);
        }
        if by_ref.len() != q.turns.len() {
            bail!(
                "namespace {} holds {} of the question's {} turns: use a fresh --store",
                q.namespace,
                by_ref.len(),
                q.turns.len()
            );
        }
        Ok(QuestionRecords { namespace: q.namespace.clone(), evidence, by_ref, by_record })
    }
}

/// A question's haystack as stored: the ledger record of every turn.
#[derive(Debug)]
pub struct QuestionRecords {
    namespace: Namespace,
    evidence: Vec<Evidence>,
    by_ref: HashMap<TurnRef, usize>,
    by_record: HashMap<TurnId, TurnRef>,
}

impl QuestionRecords {
    /// The stored turn at haystack position `at`.
    pub fn evidence_at(&self, at: TurnRef) -> anyhow::Result<&Evidence> {
        self.by_ref
            .get(&at)
            .map(|&i| &self.evidence[i])
            .with_context(|| format!("no record of turn {at:?} in {}", self.namespace))
    }

    /// The haystack position of `record`.
    pub fn turn_ref(&self, record: TurnId) -> anyhow::Result<TurnRef> {
        self.by_record
            .get(&record)
            .copied()
            .with_context(|| format!("record {record} is not a turn of {}", self.namespace))
    }
}

/// The records of the namespace a system is working on, read once per namespace (questions of
/// one conversation share it).
#[derive(Debug, Default)]
pub struct RecordsCache(Option<Arc<QuestionRecords>>);

impl RecordsCache {
    /// The records of `q`'s namespace when one of `budgets` packs (rendering cites records);
    /// `None` when every budget is unbounded.
    pub fn for_budgets(
        &mut self,
        settings: &crate::systems::SharedSettings,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Option<Arc<QuestionRecords>>> {
        if budgets.iter().all(Option::is_none) {
            return Ok(None);
        }
        self.get(settings.store()?, q).map(Some)
    }

    /// The records of `q`'s namespace.
    pub fn get(
        &mut self,
        store: &EvalStore,
        q: &EvalQuestion,
    ) -> anyhow::Result<Arc<QuestionRecords>> {
        match &self.0 {
            Some(records) if records.namespace == q.namespace => Ok(Arc::clone(records)),
            _ => {
                let records = Arc::new(store.records(q)?);
                self.0 = Some(Arc::clone(&records));
                Ok(records)
            }
        }
    }
}
