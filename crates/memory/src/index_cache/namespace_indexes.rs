//! One namespace's cached corpus and indexes, and their refresh from the ledger.

use super::*;

/// One namespace's corpus and indexes, and the namespace record they cover.
#[derive(Debug)]
pub(crate) struct NamespaceIndexes {
    pub(crate) corpus: Corpus,
    pub(crate) lexical: Bm25Index,
    /// The ledger head when these were last refreshed (`None`: never built); any write to the
    /// store moves it, so an unchanged head means nothing to read.
    pub(super) ledger_head: Option<LedgerPosition>,
    /// The namespace's last record number when these were last refreshed: every record up to it
    /// is in the corpus (or was erased before the refresh).
    pub(super) covers: Option<TurnId>,
    /// The redaction record of the namespace's last erasure these reflect (`None`: none):
    /// while it is still the last, erasures elsewhere in the ledger need no rebuild.
    pub(crate) erasures_applied: Option<TurnId>,
    pub(crate) dense: Option<DenseIndex>,
    /// The vector indexes under the memory's also-encoders, in their order (filled by the
    /// first refresh that asks for them).
    pub(crate) also_dense: Vec<Option<DenseIndex>>,
    /// BM25 over window documents, for the radius, parameters and analyzer last asked for.
    pub(crate) window: Option<WindowIndex>,
    /// Context vectors, for the radius last asked for.
    pub(crate) context_vectors: Option<ContextVectors>,
    /// Turns that got their vectors since the context vectors were last brought up to date.
    pub(super) vectors_added: Vec<TurnId>,
    /// The terms of the records the last refreshes added to the turn index, by corpus position,
    /// under its analyzer: the window index takes them instead of analysing each turn again.
    pub(super) analysed: Vec<(usize, Vec<String>)>,
    /// Turns the lexical index file held when last written or loaded by this process.
    /// (0: none; a file holds at least one turn.)
    pub(super) lexical_saved: AtomicUsize,
    /// When a refresh last changed these indexes: a namespace quiet for a while gets its lexical
    /// file written in the background (see [`crate::MemoryBuilder::lexical_files_when_quiet`]).
    pub(crate) last_refresh: Instant,
    /// Whether a background write of the lexical file is pending.
    pub(super) saving: AtomicBool,
    /// The settings of the last compile that refreshed these: what the background indexer
    /// keeps them up to date for (see [`crate::background_index`]).
    pub(crate) asked: Option<CompileConfig>,
    pub(super) text_bytes: usize,
    /// What the last refresh was asked for and saw (see [`FreshKey`]).
    pub(super) fresh_for: Option<FreshKey>,
    /// The reader tokenizers a background precount was started in (see
    /// [`crate::token_precount`]).
    pub(super) precounted: Mutex<HashSet<String>>,
}

/// What a refresh depended on, read before it: the ledger head, the embedding caches' write
/// generations (leading encoder, then the others) and what was asked (the compile settings
/// the context indexes follow). Both counters only grow, so a caller whose key equals the
/// one recorded at the last refresh would find nothing to refresh: it reads the indexes
/// under the shared lock without taking the exclusive one. Without this, every compile took
/// the exclusive lock, and concurrent compiles of one namespace ran in turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FreshKey {
    head: LedgerPosition,
    generations: Vec<u64>,
    asked: String,
}

impl FreshKey {
    /// The key now; `None` for an empty ledger (always refreshed).
    pub(crate) fn now(
        view: DerivedView<'_>,
        dense: Option<&Dense>,
        also: &[Dense],
        asked: String,
    ) -> Result<Option<FreshKey>, CompileError> {
        let generations = dense
            .into_iter()
            .chain(also)
            .map(|d| d.cache.write_generation())
            .collect::<Result<_, _>>()?;
        Ok(view.head()?.map(|head| FreshKey { head, generations, asked }))
    }
}

impl NamespaceIndexes {
    pub(super) fn empty(namespace: &Namespace) -> NamespaceIndexes {
        NamespaceIndexes {
            corpus: Corpus::new(namespace.clone(), Vec::new(), [])
                .expect("an empty corpus is valid"),
            lexical: Bm25Index::with_analyzer(BM25, cached_analyzer()),
            ledger_head: None,
            covers: None,
            erasures_applied: None,
            dense: None,
            also_dense: Vec::new(),
            window: None,
            context_vectors: None,
            vectors_added: Vec::new(),
            analysed: Vec::new(),
            lexical_saved: AtomicUsize::new(0),
            last_refresh: Instant::now(),
            saving: AtomicBool::new(false),
            asked: None,
            text_bytes: 0,
            fresh_for: None,
            precounted: Mutex::default(),
        }
    }

    /// Turns the lexical index file held when last written or loaded by this process.
    pub(crate) fn lexical_saved(&self) -> Option<usize> {
        Some(self.lexical_saved.load(Ordering::Acquire)).filter(|&turns| turns > 0)
    }

    /// Records that the lexical file now holds `turns` turns (set under the shared lock by a
    /// background write).
    pub(crate) fn set_lexical_saved(&self, turns: usize) {
        self.lexical_saved.store(turns, Ordering::Release);
    }

    /// Whether the caller may start the background write of the lexical file (none pending).
    pub(crate) fn claim_saving(&self) -> bool {
        !self.saving.swap(true, Ordering::AcqRel)
    }

    /// The background write of the lexical file ended (written, refused or failed).
    pub(crate) fn end_saving(&self) {
        self.saving.store(false, Ordering::Release);
    }

    /// Whether this is the first call for `tokenizer`: the caller then starts its precount.
    pub(crate) fn claim_precount(&self, tokenizer: &str) -> bool {
        let mut started = self.precounted.lock().unwrap_or_else(PoisonError::into_inner);
        // Asked at every compile: no allocation once started.
        !started.contains(tokenizer) && started.insert(tokenizer.to_owned())
    }

    /// Estimated heap bytes: texts held by the corpus (and their tokens, counts and postings),
    /// plus the vectors (`f32` and `i8` copies).
    pub(crate) fn heap_bytes(&self) -> usize {
        let vectors: usize = std::iter::once(&self.dense)
            .chain(&self.also_dense)
            .flatten()
            .map(|d| d.index.heap_bytes())
            .sum();
        let window = self.window.as_ref().map_or(0, |w| self.text_bytes * 8 + w.heap_bytes());
        let context = self.context_vectors.as_ref().map_or(0, ContextVectors::heap_bytes);
        self.text_bytes * 4 + self.corpus.len() * 320 + vectors + window + context
    }

    /// Brings the context indexes `config` asks for up to the corpus and its vectors: built
    /// when missing or asked for with other settings, else extended by the windows that new
    /// records or new vectors changed.
    pub(crate) fn refresh_context(
        &mut self,
        config: &CompileConfig,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        let lexical_err = |source| CompileError::Lexical { namespace: namespace.clone(), source };
        let radius = config.context.lexical_radius;
        if radius > 0 && config.lexical.top_n > 0 {
            let params = Bm25Params { k1: config.lexical.k1, b: config.lexical.b };
            let analyzer = config.lexical.analyzer;
            match &mut self.window {
                Some(w)
                    if w.radius() == radius
                        && w.built_for() <= self.corpus.len()
                        && w.index().params() == params
                        && w.index().analyzer() == analyzer =>
                {
                    if w.built_for() < self.corpus.len() {
                        let _span = tracing::debug_span!("window_index_extend", %namespace, radius)
                            .entered();
                        let analysed = &self.analysed;
                        let same_analyzer = analyzer == self.lexical.analyzer();
                        w.extend_analysed(&self.corpus, &|pos| {
                            let at = analysed.binary_search_by_key(&pos, |(p, _)| *p).ok()?;
                            same_analyzer.then(|| analysed[at].1.as_slice())
                        })
                        .map_err(lexical_err)?;
                    }
                }
                _ => {
                    let _span = tracing::debug_span!("window_index", %namespace, radius).entered();
                    self.window = Some(
                        WindowIndex::build(&self.corpus, radius, params, analyzer)
                            .map_err(lexical_err)?,
                    );
                }
            }
        }
        self.analysed.clear();
        let radius = config.context.dense_radius;
        if let (true, DenseConfig::On { .. }, Some(dense)) =
            (radius > 0, config.dense, self.dense.as_ref())
        {
            let with_vectors = self.corpus.len() - dense.missing.len();
            let dim = dense.index.dim();
            let turn_vector = |id| turn_vector(&dense.index, id, dim);
            match &mut self.context_vectors {
                Some(c) if c.radius() == radius && c.built_for() <= self.corpus.len() => {
                    if c.built_for() < self.corpus.len() || c.vectors_seen() != with_vectors {
                        let _span =
                            tracing::debug_span!("context_vectors_update", %namespace, radius)
                                .entered();
                        let embedded = self.vectors_added.iter().copied();
                        c.update(&self.corpus, embedded, with_vectors, |id| {
                            turn_vector(id).map(Cow::Owned)
                        });
                    }
                }
                _ => {
                    let _span =
                        tracing::debug_span!("context_vectors", %namespace, radius).entered();
                    let turn_vectors: HashMap<TurnId, Vec<f32>> = self
                        .corpus
                        .evidence()
                        .iter()
                        .filter_map(|e| Some((e.id, turn_vector(e.id)?)))
                        .collect();
                    self.context_vectors = Some(ContextVectors::build(
                        &self.corpus,
                        radius,
                        dim,
                        with_vectors,
                        |id| turn_vectors.get(&id).map(Vec::as_slice),
                    ));
                }
            }
            self.vectors_added.clear();
        }
        Ok(())
    }

    /// Brings the corpus, the lexical index and (when `dense` is given) the vector indexes of
    /// `dense` and `also` to the ledger head: new turns incrementally, a full rebuild after an
    /// erasure of the namespace they do not reflect (pending ones are applied first, by
    /// [`IndexCache::refreshed`]).
    pub(crate) fn refresh(
        &mut self,
        view: DerivedView<'_>,
        namespace: &Namespace,
        dense: Option<&Dense>,
        also: &[Dense],
    ) -> Result<(), CompileError> {
        let head = view.head()?;
        if head.is_none() || head != self.ledger_head {
            let _span = tracing::debug_span!("refresh_indexes", %namespace).entered();
            // Only the records since the last refresh are read: counting redactions over the
            // whole ledger cost more than the rest of a compile after each append.
            let built_at = match self.ledger_head {
                Some(at) if !view.ledger.erased_after(Some(at))? => Some(at),
                // Erased elsewhere, or here in place already.
                Some(at) if view.last_erasure(namespace)? == self.erasures_applied => Some(at),
                _ => None,
            };
            // Read before the turns: a lower bound of what they hold.
            let covers = view.ledger.namespace_head(namespace)?;
            // Records the turn index holds already (a saved one was loaded).
            let mut indexed = 0;
            let new_records = match built_at {
                // Appends that committed after `head` was read may already be in the corpus.
                Some(_) => view.evidence_after(namespace, self.corpus.last_record())?,
                None => {
                    *self = NamespaceIndexes::empty(namespace);
                    // Read before the turns: what they reflect at least.
                    self.erasures_applied = view.last_erasure(namespace)?;
                    let live = view.evidence(namespace)?;
                    if let Some(saved) = lexical_file::load(view, namespace, &live)? {
                        indexed = saved.records;
                        self.lexical = saved.lexical;
                        self.window = saved.window;
                        self.set_lexical_saved(saved.records);
                    }
                    live
                }
            };
            for e in &new_records {
                self.text_bytes += e.turn.text.len();
            }
            // Kept for the window index only when few: a rebuild's window index analyses as it goes.
            let keep = self.analysed.len() + new_records.len() - indexed <= ANALYSED_KEPT;
            if !keep {
                self.analysed.clear();
            }
            for (i, e) in new_records.iter().enumerate().skip(indexed) {
                let terms = self.lexical.analyze(&turn_document(&e.turn));
                self.lexical.add_terms(e.id, &terms).map_err(|source| CompileError::Lexical {
                    namespace: namespace.clone(),
                    source,
                })?;
                if keep {
                    self.analysed.push((self.corpus.len() + i, terms));
                }
            }
            for index in std::iter::once(&mut self.dense).chain(&mut self.also_dense).flatten() {
                index.missing.extend(new_records.iter().map(pending));
            }
            for e in new_records {
                self.corpus.push(e).map_err(|source| CompileError::Corpus {
                    namespace: namespace.clone(),
                    source,
                })?;
            }
            if let Some(covers) = covers {
                self.lexical.mark_covered(covers).map_err(|source| CompileError::Lexical {
                    namespace: namespace.clone(),
                    source,
                })?;
            }
            self.ledger_head = head;
            self.covers = covers;
        }
        if let Some(dense) = dense {
            let added =
                refresh_dense(&mut self.dense, &self.corpus, self.covers, view, dense, namespace)?;
            if self.context_vectors.is_some() {
                self.vectors_added.extend(added);
                self.vectors_added.dedup();
            }
            self.also_dense.resize_with(also.len(), || None);
            for (slot, dense) in self.also_dense.iter_mut().zip(also) {
                refresh_dense(slot, &self.corpus, self.covers, view, dense, namespace)?;
            }
        }
        Ok(())
    }

    /// A lexical index of this corpus under other BM25 parameters or another analyzer,
    /// covering the same position.
    pub(crate) fn lexical_with(
        &self,
        params: Bm25Params,
        analyzer: Analyzer,
        namespace: &Namespace,
    ) -> Result<Bm25Index, CompileError> {
        let lexical_err = |source| CompileError::Lexical { namespace: namespace.clone(), source };
        let mut lexical =
            Bm25Index::with_analyzer(params.validate().map_err(lexical_err)?, analyzer);
        for e in self.corpus.evidence() {
            lexical.add(e.id, &turn_document(&e.turn)).map_err(lexical_err)?;
        }
        if let Some(covers) = self.covers {
            lexical.mark_covered(covers).map_err(lexical_err)?;
        }
        Ok(lexical)
    }
}
