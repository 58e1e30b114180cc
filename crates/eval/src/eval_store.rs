//! The evaluation's store: every benchmark namespace appended to a real ledger (`Memory`), and
//! every turn text embedded once into the store's content-addressed embedding cache, so an
//! interrupted run resumes where it stopped and a second run embeds nothing.

use std::{collections::HashMap, path::Path, sync::Arc};

use anyhow::{Context, bail};
use evicortex::{CatchUpLimits, EmbedProgress, EmbedReport, EmbeddingCache, Memory, embed_pending};
use evicortex_core::{EventTime, Evidence, Namespace, SessionId, Turn, TurnIndex};
use evicortex_embed::Encoder;

use crate::{eval_question::EvalQuestion, ranking::TurnRef};

/// A store directory holding the benchmark's namespaces.
#[derive(Debug)]
pub struct EvalStore {
    /// The ledger facade.
    pub memory: Memory,
    /// The embedding cache of the same directory.
    pub cache: Arc<EmbeddingCache>,
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
    /// Opens (creating) the store in `dir`.
    pub fn open(dir: &Path) -> anyhow::Result<EvalStore> {
        let memory =
            Memory::open(dir).with_context(|| format!("opening the store {}", dir.display()))?;
        let cache = EmbeddingCache::attach_to(&memory)?;
        Ok(EvalStore { memory, cache })
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
                .map(|t| {
                    Ok(Turn {
                        namespace: q.namespace.clone(),
                        session: SessionId::new(&t.session)?,
                        turn: TurnIndex::new(t.at.turn as u32),
                        role: t.role,
                        speaker: t.speaker.clone(),
                        text: t.text.clone(),
                        time: event_time(t.time),
                        meta: serde_json::Map::new(),
                    })
                })
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

    /// Embeds every text of the store that has no vector under `encoder` (resumable).
    pub fn embed(
        &self,
        encoder: &dyn Encoder,
        progress: &mut dyn FnMut(&EmbedProgress),
    ) -> anyhow::Result<EmbedReport> {
        Ok(embed_pending(&self.memory, &self.cache, encoder, CatchUpLimits::default(), progress)?)
    }

    /// The namespace's evidence, and the map from each record to the question's turn position.
    pub fn evidence(
        &self,
        q: &EvalQuestion,
    ) -> anyhow::Result<(Vec<Evidence>, HashMap<evicortex_core::TurnId, TurnRef>)> {
        let evidence = self.memory.evidence(&q.namespace)?;
        let by_key: HashMap<(&str, usize), TurnRef> =
            q.turns.iter().map(|t| ((t.session.as_str(), t.at.turn), t.at)).collect();
        let mut map = HashMap::with_capacity(evidence.len());
        for e in &evidence {
            let at =
                by_key.get(&(e.turn.session.as_str(), e.turn.turn.raw() as usize)).with_context(
                    || format!("record {} of {} is not in the dataset", e.id, q.namespace),
                )?;
            map.insert(e.id, *at);
        }
        Ok((evidence, map))
    }
}
