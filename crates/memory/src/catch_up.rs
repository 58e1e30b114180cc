//! Catch-up: embedding the live turns whose document has no vector under the memory's encoder
//! yet, and the one guarded path by which vectors enter the embedding cache.
//!
//! What is embedded is the turn's document (`evicortex_compiler::turn_document`: the speaker's
//! name and the text), the same one BM25 indexes; the cache is keyed by the document's digest.
//! Documents are read from the ledger and embedded outside any lock (embedding is slow), then
//! written under the writer lock that erasures hold while they purge. A document that an erasure
//! since the read orphaned is left out at that point, so a vector of an erased turn never
//! survives a concurrent erasure. On a PostgreSQL store, whose cache every server writes, the
//! check also asks the ledger for another process's erasures since the read, inside the
//! transaction that holds the database cache's lock (which an erasure's purge takes too).

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    time::Instant,
};

use evicortex_core::{Namespace, TextDigest, TurnId};
use evicortex_embed::{EmbeddingRole, EncoderIdentityDigest, Overlength, TextEmbedding};
use evicortex_ledger::{LedgerPosition, ScanEvidence};

use evicortex_compiler::turn_document;

use crate::{
    CatchUpError, Memory, ReadError,
    dense::Dense,
    embedding_cache::{FirstTurn, Keep, live_documents},
};

/// What a catch-up had seen when it read its texts: the erasures through this memory, and the
/// ledger head (after which another process's erasures show).
#[derive(Clone, Copy, Debug)]
struct ReadMark {
    erasures: u64,
    head: Option<LedgerPosition>,
}

/// Texts a catch-up looks up one at a time before it reads every known text at once instead
/// (about what that one read costs, in lookups, on a store of 70k texts: 70 ms against 0.1 ms
/// a lookup).
const LOOKUPS_BEFORE_ONE_READ: usize = 1_000;

/// Progress of [`Memory::catch_up`], reported after every committed chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EmbedProgress {
    /// Distinct texts embedded so far in this run.
    pub done_texts: u64,
    /// Distinct texts this run has to embed.
    pub total_texts: u64,
    /// Encoder tokens embedded so far in this run.
    pub done_tokens: u64,
    /// Encoder tokens this run has to embed.
    pub total_tokens: u64,
}

/// A turn whose text was not embedded because it is longer than the encoder's maximum and the
/// overlength policy is `refuse`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedTurn {
    /// The namespace of the first live turn holding the text.
    pub namespace: Namespace,
    /// The first live turn holding the text (its number in `namespace`).
    pub turn: TurnId,
    /// The text's length in encoder tokens.
    pub tokens: usize,
}

/// What [`Memory::catch_up`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedReport {
    /// The identity the vectors were stored under.
    pub identity: EncoderIdentityDigest,
    /// The encoder's model name.
    pub model: String,
    /// Live turns in the ledger.
    pub live_turns: u64,
    /// Distinct live texts.
    pub distinct_texts: u64,
    /// Distinct texts that already had vectors (or an earlier refusal) under this identity.
    pub already_cached: u64,
    /// Distinct texts embedded by this run.
    pub embedded_texts: u64,
    /// Encoder tokens embedded by this run (special tokens included, before windowing).
    pub embedded_tokens: u64,
    /// Vectors written by this run (more than texts when windows are used).
    pub vectors_written: u64,
    /// Texts refused as overlength (this run and earlier ones), by first live turn.
    pub refused: Vec<RefusedTurn>,
    /// Seconds spent.
    pub seconds: f64,
    /// The same for each also-encoder of the memory
    /// ([`MemoryBuilder::also_encoder`](crate::MemoryBuilder::also_encoder)), in order; their
    /// own `also` is empty.
    pub also: Vec<EmbedReport>,
}

/// How [`Memory::catch_up`] groups work. Changes speed and resumability granularity, not results.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CatchUpLimits {
    /// Most texts embedded and committed together.
    pub chunk_texts: usize,
}

impl Default for CatchUpLimits {
    fn default() -> CatchUpLimits {
        CatchUpLimits { chunk_texts: 512 }
    }
}

impl Memory {
    /// Embeds every live turn (of `namespace`, or of the whole store) whose text has no vector
    /// under the encoder's identity: identical texts once across namespaces (the cache is
    /// content-addressed), shortest first, in chunks each committed on its own, so an
    /// interrupted run resumes where it stopped. Under the `refuse` overlength policy longer
    /// texts are not embedded; they are recorded and reported (by first turn and token count).
    pub fn catch_up(
        &self,
        namespace: Option<&Namespace>,
        limits: CatchUpLimits,
        progress: &mut dyn FnMut(&EmbedProgress),
    ) -> Result<EmbedReport, CatchUpError> {
        self.catch_up_after(namespace, None, limits, progress)
    }

    /// The background embedder's round: a catch-up over the turns after `after` in small
    /// chunks; returns the ledger head read before it started.
    pub(crate) fn background_round(
        &self,
        after: Option<LedgerPosition>,
    ) -> Result<Option<LedgerPosition>, CatchUpError> {
        let head = self.head()?;
        let limits = CatchUpLimits { chunk_texts: crate::background::BACKGROUND_CHUNK_TEXTS };
        let report = self.catch_up_after(None, after, limits, &mut |_| {})?;
        if report.embedded_texts > 0 {
            tracing::debug!(texts = report.embedded_texts, "embedded in the background");
        }
        Ok(head)
    }

    /// The encoder whose vectors this memory may store: none beside the store's writer.
    fn writing_encoder(&self) -> Result<&crate::dense::Dense, CatchUpError> {
        if self.inner.store_access.beside() {
            return Err(CatchUpError::BesideWriter);
        }
        self.inner.dense.as_ref().ok_or(CatchUpError::NoEncoder)
    }

    /// [`Memory::catch_up`] over the turns recorded after `after` only.
    pub(crate) fn catch_up_after(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        limits: CatchUpLimits,
        progress: &mut dyn FnMut(&EmbedProgress),
    ) -> Result<EmbedReport, CatchUpError> {
        let dense = self.writing_encoder()?;
        dense.cache.set_last_identity(&dense.encoder.identity_digest())?;
        if let Some(pg) = &self.inner.pg_dense {
            pg.record_overlength(dense.encoder.identity().overlength)
                .map_err(|e| CatchUpError::Shared(Box::new(e)))?;
        }
        // The leading encoder first: compile's abstention and context vectors rest on it.
        let mut report = self.catch_up_with(dense, namespace, after, limits, progress)?;
        for also in &self.inner.also_dense {
            report.also.push(self.catch_up_with(also, namespace, after, limits, progress)?);
        }
        Ok(report)
    }

    /// [`Memory::catch_up_after`] with one of the memory's encoders.
    fn catch_up_with(
        &self,
        dense: &Dense,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        limits: CatchUpLimits,
        progress: &mut dyn FnMut(&EmbedProgress),
    ) -> Result<EmbedReport, CatchUpError> {
        let _span =
            tracing::info_span!("catch_up", model = %dense.encoder.identity().model).entered();
        let started = Instant::now();
        let encoder = dense.encoder.as_ref();
        let identity = encoder.identity();
        let digest = identity.digest();
        // Erasures made before this point are already reflected in what the ledger returns.
        let epoch = self.read_mark()?;

        let mut live_turns = 0u64;
        let mut first_turn: HashMap<TextDigest, FirstTurn> = HashMap::new();
        let mut pending: Vec<(TextDigest, String)> = Vec::new();
        let mut cache_error = None;
        // A scan of the whole ledger asks about every text: read the known ones at once. A scan
        // of what came after `after` (usually a few appends) looks texts up one by one, until
        // it has asked about as many as make the one read cheaper.
        let mut known = match after {
            None => Some(dense.cache.known_texts(&digest)?),
            Some(_) => None,
        };
        let mut lookups = 0usize;
        self.inner.ledger.for_each_evidence_since(namespace, after, |position, e| {
            live_turns += 1;
            let document = turn_document(&e.turn);
            let text = TextDigest::of(&document);
            if let Entry::Vacant(slot) = first_turn.entry(text) {
                slot.insert(FirstTurn { position, namespace: e.turn.namespace.clone(), id: e.id });
                if known.is_none() && lookups == LOOKUPS_BEFORE_ONE_READ {
                    match dense.cache.known_texts(&digest) {
                        Ok(set) => known = Some(set),
                        Err(err) => cache_error = cache_error.take().or(Some(err)),
                    }
                }
                lookups += 1;
                let is_known = match &known {
                    Some(set) => Ok(set.contains(&text)),
                    None => dense.cache.is_known(&digest, &text),
                };
                match is_known {
                    Ok(true) => {}
                    Ok(false) => pending.push((text, document.into_owned())),
                    Err(err) => cache_error = cache_error.take().or(Some(err)),
                }
            }
            Ok::<(), ReadError>(())
        })?;
        if let Some(err) = cache_error {
            return Err(err.into());
        }
        let distinct_texts = first_turn.len() as u64;
        let already_cached = distinct_texts - pending.len() as u64;

        let texts: Vec<&str> = pending.iter().map(|(_, t)| t.as_str()).collect();
        let counts = encoder.count_tokens_many(EmbeddingRole::Document, &texts)?;
        let mut order: Vec<usize> = (0..pending.len()).collect();
        let mut newly_refused = Vec::new();
        if identity.overlength == Overlength::Refuse {
            order.retain(|&i| {
                let fits = counts[i] <= identity.max_tokens;
                if !fits {
                    newly_refused.push((pending[i].0, counts[i]));
                }
                fits
            });
        }
        self.store_derived(dense, epoch, &[], &newly_refused)?;
        order.sort_by_key(|&i| (counts[i], i));

        let mut state = EmbedProgress {
            done_texts: 0,
            total_texts: order.len() as u64,
            done_tokens: 0,
            total_tokens: order.iter().map(|&i| counts[i] as u64).sum(),
        };
        progress(&state);
        let mut vectors_written = 0;
        for chunk in order.chunks(limits.chunk_texts.max(1)) {
            let chunk_texts: Vec<&str> = chunk.iter().map(|&i| pending[i].1.as_str()).collect();
            let embedded = encoder.embed_documents(&chunk_texts)?;
            let rows: Vec<(TextDigest, &TextEmbedding)> =
                chunk.iter().zip(&embedded).map(|(&i, e)| (pending[i].0, e)).collect();
            vectors_written += self.store_derived(dense, epoch, &rows, &[])?;
            state.done_texts += chunk.len() as u64;
            state.done_tokens += chunk.iter().map(|&i| counts[i] as u64).sum::<u64>();
            progress(&state);
        }

        let refused = dense.cache.refused_turns(&digest, &first_turn)?;
        Ok(EmbedReport {
            identity: digest,
            model: identity.model.clone(),
            live_turns,
            distinct_texts,
            already_cached,
            embedded_texts: state.done_texts,
            embedded_tokens: state.done_tokens,
            vectors_written,
            refused,
            seconds: started.elapsed().as_secs_f64(),
            also: Vec::new(),
        })
    }

    /// Embeds `texts` as documents with the memory's encoder, taking vectors already in the
    /// embedding cache from it and storing the others there (for callers that embed texts of
    /// their own, such as the evaluation's chunk comparator). Such vectors are derived data of no
    /// turn: the first open after an erasure drops them with every text no live turn holds.
    pub fn embed_documents_cached(
        &self,
        texts: &[&str],
    ) -> Result<Vec<TextEmbedding>, CatchUpError> {
        let dense = self.writing_encoder()?;
        let epoch = self.read_mark()?;
        let digest = dense.encoder.identity_digest();
        let digests: Vec<TextDigest> = texts.iter().map(|t| TextDigest::of(t)).collect();
        let mut out: Vec<Option<TextEmbedding>> = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        for (i, text) in digests.iter().enumerate() {
            match dense.cache.embedding(&digest, text)? {
                Some(e) => out.push(Some(e)),
                None => {
                    out.push(None);
                    missing.push(i);
                }
            }
        }
        if !missing.is_empty() {
            let to_embed: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let embedded = dense.encoder.embed_documents(&to_embed)?;
            let rows: Vec<(TextDigest, &TextEmbedding)> =
                missing.iter().zip(&embedded).map(|(&i, e)| (digests[i], e)).collect();
            self.store_derived(dense, epoch, &rows, &[])?;
            for (&i, e) in missing.iter().zip(embedded) {
                out[i] = Some(e);
            }
        }
        Ok(out.into_iter().map(|e| e.expect("every text is filled above")).collect())
    }

    /// The erasures and the ledger head before a read of texts to embed.
    fn read_mark(&self) -> Result<ReadMark, ReadError> {
        let erasures = self.lock_writes().erasures;
        Ok(ReadMark { erasures, head: self.inner.ledger.head()? })
    }

    /// Writes vectors (`rows`) and overlength refusals of texts read from the ledger after
    /// `epoch`, under the writer lock, leaving out every text an erasure made since then
    /// orphaned: this memory's (its erasure log) and, on a PostgreSQL store, another process's
    /// (the ledger, asked inside the cache's write). Returns the vectors written.
    fn store_derived(
        &self,
        dense: &Dense,
        epoch: ReadMark,
        rows: &[(TextDigest, &TextEmbedding)],
        refused: &[(TextDigest, usize)],
    ) -> Result<u64, CatchUpError> {
        if rows.is_empty() && refused.is_empty() {
            return Ok(0);
        }
        let writes = self.lock_writes();
        let orphaned = writes.orphaned_since(epoch.erasures);
        let ledger = &*self.inner.ledger;
        let shared = self.inner.erasures.is_some();
        let mut keep = || -> Result<Keep, ReadError> {
            let elsewhere = shared && ledger.erased_after(epoch.head)?;
            Ok(match &orphaned {
                Some(orphaned) if !elsewhere && orphaned.is_empty() => Box::new(|_| true),
                Some(orphaned) if !elsewhere => {
                    let orphaned = orphaned.clone();
                    Box::new(move |t| !orphaned.contains(t))
                }
                _ => {
                    let live: HashSet<TextDigest> = live_documents(ledger)?;
                    Box::new(move |t| live.contains(t))
                }
            })
        };
        #[cfg(test)]
        self.inner.before_put.run();
        let written = dense.cache.store(dense.encoder.identity(), rows, refused, &mut keep)?;
        drop(writes);
        Ok(written)
    }
}

#[cfg(test)]
mod tests;
