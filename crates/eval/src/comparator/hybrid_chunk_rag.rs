//! Metadata-aware hybrid chunk RAG, the comparator.
//!
//! Each admitted session is split into token windows of at most `window_tokens` ENCODER tokens
//! (special tokens and the metadata header included, so every chunk fits the encoder's 256-token
//! limit whole) overlapping by about `overlap_tokens`. A chunk's text starts with its metadata,
//! `Session <id> (<date>)`, followed by `<label>: <words>` lines, the label being the speaker's
//! name where the source gives one, else the role: every field of the product's turn document
//! (`turn_document`: the speaker, the text with a shared image's caption) is in the chunk that
//! holds the turn, so both systems retrieve over the same words. Windows are cut at word
//! boundaries; the encoder's WordPiece count is additive over whitespace-separated words, and the
//! final text of every chunk is counted again exactly.
//!
//! Retrieval: BM25 (the product's index, under the product's default analyzer unless the
//! configuration names another) and dense cosine (the same pinned encoder
//! as EviCortex, vectors in the same content-addressed cache) over the chunks, `top_n` each, fused
//! by RRF with the same `k` as EviCortex. Chunks are packed in fused order into the same budget in
//! the same reader tokenizer, with the product's layout and exact count: a chunk is rendered as
//! the parts of turns it holds, each cited like a turn of EviCortex's contexts, under the same
//! preamble and session headers. Each chunk maps back to every turn it holds a word of, so both
//! systems are scored on the same evidence: a packed chunk credits its turns.

use std::{collections::HashMap, sync::Arc, time::Instant};

use anyhow::{Context, bail};
use evicortex::front_end::{PackPolicy, RenderTurn, pack_ranked};
use evicortex::{Analyzer, CompileConfig, EmbeddingRole, Encoder, TokenBudget};
use evicortex_lexical::{Bm25Index, Bm25Params};
use evicortex_vector::{ExactIndex, VectorIndex, VectorIndexRead};
use serde::Serialize;

use crate::{
    eval_question::{EvalQuestion, EvalTurn},
    eval_store::{EvalStore, RecordsCache},
    ranking::{Ranking, RankingCorpus, TurnRef},
    systems::{EvalSystem, SharedSettings, SystemOutput},
};

/// Every setting of the comparator; recorded in reports.
#[derive(Copy, Clone, Debug, PartialEq, Serialize)]
pub struct ChunkRagConfig {
    /// Most encoder tokens per chunk, special tokens and header included (at most the encoder's
    /// maximum length).
    pub window_tokens: usize,
    /// Encoder tokens shared by consecutive chunks of a session (approximately: cut at words).
    pub overlap_tokens: usize,
    /// Chunks taken from BM25.
    pub lexical_top_n: usize,
    /// Chunks taken from dense retrieval.
    pub dense_top_n: usize,
    /// BM25 k1 and b (the same as EviCortex's).
    pub bm25_k1: f32,
    /// BM25 b.
    pub bm25_b: f32,
    /// The analyzer of chunks and questions (the product's default unless stated).
    pub analyzer: Analyzer,
    /// RRF k (the same as EviCortex's).
    pub rrf_k: f64,
}

impl ChunkRagConfig {
    /// The preregistered configuration: 256-token windows overlapping by 64 (the encoder's own
    /// window policy for long turns), `candidate_limit` chunks per retriever, and the BM25
    /// parameters, analyzer and RRF k of EviCortex's default configuration.
    pub fn preregistered(candidate_limit: usize) -> ChunkRagConfig {
        let product = CompileConfig::default_for(true);
        ChunkRagConfig {
            window_tokens: 256,
            overlap_tokens: 64,
            lexical_top_n: candidate_limit,
            dense_top_n: candidate_limit,
            bm25_k1: product.lexical.k1,
            bm25_b: product.lexical.b,
            analyzer: product.lexical.analyzer,
            rrf_k: f64::from(product.rrf_k),
        }
    }
}

/// One chunk of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The session's unique id.
    pub session: String,
    /// The session's date.
    pub time: chrono::NaiveDateTime,
    /// Position of the chunk in its session.
    pub index_in_session: usize,
    /// The embedded and indexed text (metadata header + turn lines).
    pub text: String,
    /// The body (turn lines only).
    pub body: String,
    /// Every turn the chunk holds a word of, in session order.
    pub turns: Vec<TurnRef>,
    /// The words of each of those turns the chunk holds, as the reader sees them.
    pub parts: Vec<String>,
    /// Exact encoder tokens of `text`, special tokens included.
    pub encoder_tokens: usize,
}

/// Splits the question's admitted sessions into chunks.
pub fn chunk_sessions(
    q: &EvalQuestion,
    config: &ChunkRagConfig,
    encoder: &dyn Encoder,
    word_tokens: &mut HashMap<String, usize>,
) -> anyhow::Result<Vec<Chunk>> {
    let specials = encoder.count_tokens(EmbeddingRole::Document, "")?;
    let mut chunks = Vec::new();
    let admitted: Vec<&EvalTurn> = q.admitted().collect();
    let mut start = 0;
    while start < admitted.len() {
        let session = admitted[start].at.session;
        let end = admitted[start..]
            .iter()
            .position(|t| t.at.session != session)
            .map_or(admitted.len(), |p| start + p);
        let turns = &admitted[start..end];
        start = end;
        let first = turns[0];
        let header = format!("Session {} ({})\n", first.session, first.time.format("%Y-%m-%d"));
        let header_tokens = encoder.count_tokens(EmbeddingRole::Document, &header)? - specials;
        let room = config
            .window_tokens
            .checked_sub(specials + header_tokens + 8)
            .context("window_tokens leaves no room after the header")?;
        // Words of the session with their turn, and the label at each turn's first word.
        let mut words: Vec<(usize, &str, usize)> = Vec::new(); // (turn idx in `turns`, word, tokens)
        for (i, t) in turns.iter().enumerate() {
            let prefix = format!("{}:", line_label(t));
            let n = count_word(encoder, word_tokens, &prefix, specials)?;
            words.push((i, "", n));
            for w in t.text.split_whitespace() {
                let n = count_word(encoder, word_tokens, w, specials)?;
                if n <= room / 2 {
                    words.push((i, w, n));
                    continue;
                }
                // A "word" longer than half a window (a URL, base64, minified code) is cut at
                // character boundaries into pieces that fit, rendered space-separated: the
                // chunk text then differs from the turn by those spaces, the turn map does not.
                for (piece, n) in split_long_word(encoder, w, room / 2, specials)? {
                    words.push((i, piece, n));
                }
            }
        }
        let mut w = 0;
        let mut index_in_session = 0;
        while w < words.len() {
            let mut used = 0;
            let mut end = w;
            while end < words.len() && (used + words[end].2 <= room || end == w) {
                used += words[end].2;
                end += 1;
            }
            let mut chunk = render_chunk(turns, &words[w..end], &header);
            let mut cut = end;
            // Exact check: the assembled text must fit the encoder window; shrink until it does.
            loop {
                let n = encoder.count_tokens(EmbeddingRole::Document, &chunk.text)?;
                if n <= config.window_tokens || cut <= w + 1 {
                    if n > config.window_tokens {
                        bail!(
                            "a single word of session {} exceeds the chunk window",
                            first.session
                        );
                    }
                    chunks.push(Chunk {
                        session: first.session.clone(),
                        time: first.time,
                        index_in_session,
                        text: chunk.text,
                        body: chunk.body,
                        turns: chunk.turns,
                        parts: chunk.parts,
                        encoder_tokens: n,
                    });
                    break;
                }
                cut -= 1;
                chunk = render_chunk(turns, &words[w..cut], &header);
            }
            index_in_session += 1;
            if cut >= words.len() {
                break;
            }
            // Step back about `overlap_tokens` for the next window, always moving forward.
            let mut back = 0;
            let mut next = cut;
            while next > w + 1 && back + words[next - 1].2 <= config.overlap_tokens {
                back += words[next - 1].2;
                next -= 1;
            }
            w = next;
        }
    }
    Ok(chunks)
}

/// What a turn's chunk line starts with: the speaker's name where the source gives one (the
/// product's turn document leads with it), else the role.
pub fn line_label(turn: &EvalTurn) -> &str {
    turn.speaker.as_deref().unwrap_or(turn.role.as_str())
}

/// `word` cut into consecutive pieces of at most `limit` encoder tokens each (the longest prefix
/// that fits, found by bisection on character boundaries; a single character always goes).
fn split_long_word<'a>(
    encoder: &dyn Encoder,
    word: &'a str,
    limit: usize,
    specials: usize,
) -> anyhow::Result<Vec<(&'a str, usize)>> {
    let count = |s: &str| -> anyhow::Result<usize> {
        Ok(encoder.count_tokens(EmbeddingRole::Document, s)? - specials)
    };
    let mut pieces = Vec::new();
    let mut rest = word;
    while !rest.is_empty() {
        let ends: Vec<usize> = rest.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
        let (mut lo, mut hi) = (0, ends.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if count(&rest[..ends[mid]])? <= limit { lo = mid } else { hi = mid - 1 }
        }
        let (piece, tail) = rest.split_at(ends[lo]);
        pieces.push((piece, count(piece)?));
        rest = tail;
    }
    Ok(pieces)
}

fn count_word(
    encoder: &dyn Encoder,
    cache: &mut HashMap<String, usize>,
    word: &str,
    specials: usize,
) -> anyhow::Result<usize> {
    if let Some(&n) = cache.get(word) {
        return Ok(n);
    }
    let n = encoder.count_tokens(EmbeddingRole::Document, word)? - specials;
    cache.insert(word.to_owned(), n);
    Ok(n)
}

/// A chunk as rendered from its words.
struct RenderedChunk {
    text: String,
    body: String,
    turns: Vec<TurnRef>,
    parts: Vec<String>,
}

/// The chunk of the words `slice`: its full text, body, turns and per-turn parts.
fn render_chunk(
    turns: &[&EvalTurn],
    slice: &[(usize, &str, usize)],
    header: &str,
) -> RenderedChunk {
    let mut body = String::new();
    let mut refs: Vec<TurnRef> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<usize> = None;
    for &(i, word, _) in slice {
        if current != Some(i) {
            if current.is_some() {
                body.push('\n');
            }
            current = Some(i);
            refs.push(turns[i].at);
            parts.push(String::new());
            body.push_str(line_label(turns[i]));
            body.push(':');
        }
        if !word.is_empty() {
            body.push(' ');
            body.push_str(word);
            let part = parts.last_mut().expect("pushed with its turn");
            if !part.is_empty() {
                part.push(' ');
            }
            part.push_str(word);
        }
    }
    RenderedChunk { text: format!("{header}{body}"), body, turns: refs, parts }
}

/// The comparator system.
pub struct HybridChunkRag {
    config: ChunkRagConfig,
    store: Arc<EvalStore>,
    encoder: Arc<dyn Encoder>,
    settings: SharedSettings,
    word_tokens: HashMap<String, usize>,
    records: RecordsCache,
}

impl std::fmt::Debug for HybridChunkRag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridChunkRag").field("config", &self.config).finish_non_exhaustive()
    }
}

impl HybridChunkRag {
    /// The comparator over the store's memory, whose encoder embeds the chunks (vectors kept in
    /// the store's content-addressed cache).
    pub fn new(
        config: ChunkRagConfig,
        store: Arc<EvalStore>,
        settings: SharedSettings,
    ) -> anyhow::Result<HybridChunkRag> {
        let encoder =
            store.memory.encoder().cloned().context("the comparator needs the store's encoder")?;
        if config.window_tokens > encoder.identity().max_tokens {
            bail!(
                "chunk window {} exceeds the encoder's maximum length {}",
                config.window_tokens,
                encoder.identity().max_tokens
            );
        }
        Ok(HybridChunkRag {
            config,
            store,
            encoder,
            settings,
            word_tokens: HashMap::new(),
            records: RecordsCache::default(),
        })
    }

    /// Vectors of `chunks`, from the cache or embedded now (and cached: resumable).
    fn vectors(&self, chunks: &[Chunk]) -> anyhow::Result<Vec<Vec<f32>>> {
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        let embedded = self.store.memory.embed_documents_cached(&texts)?;
        embedded
            .into_iter()
            .map(|e| Ok(e.single().context("a chunk produced several windows")?.to_vec()))
            .collect()
    }
}

impl EvalSystem for HybridChunkRag {
    fn name(&self) -> &str {
        "comparator"
    }

    fn run(
        &mut self,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        let start = Instant::now();
        let chunks = chunk_sessions(q, &self.config, self.encoder.as_ref(), &mut self.word_tokens)?;
        let chunking = start.elapsed();
        let start = Instant::now();
        let vectors = self.vectors(&chunks)?;
        let embed = start.elapsed();
        let start = Instant::now();
        let mut lexical: Bm25Index<u32> = Bm25Index::with_analyzer(
            Bm25Params { k1: self.config.bm25_k1, b: self.config.bm25_b },
            self.config.analyzer,
        );
        let mut dense: ExactIndex<u32> = ExactIndex::new(self.encoder.dimension());
        for (i, (c, v)) in chunks.iter().zip(&vectors).enumerate() {
            lexical.add(i as u32, &c.text)?;
            dense.insert(i as u32, v)?;
        }
        let index = start.elapsed();
        let start = Instant::now();
        let lexical_hits =
            lexical.search(&lexical.analyze(&q.query), self.config.lexical_top_n, |_| true);
        let query = self.store.memory.embed_query(&q.query)?;
        let dense_hits = dense.search(&query.vector, self.config.dense_top_n, &mut |_| true)?;
        let mut fused: HashMap<u32, f64> = HashMap::new();
        for (rank, key) in lexical_hits.iter().map(|h| h.key).enumerate() {
            *fused.entry(key).or_insert(0.0) += 1.0 / (self.config.rrf_k + rank as f64 + 1.0);
        }
        for (rank, key) in dense_hits.iter().map(|h| h.key).enumerate() {
            *fused.entry(key).or_insert(0.0) += 1.0 / (self.config.rrf_k + rank as f64 + 1.0);
        }
        let mut order: Vec<(u32, f64)> = fused.into_iter().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let retrieve = start.elapsed();
        let records = self.records.get(&self.store, q)?;
        let items: Vec<Vec<RenderTurn<'_>>> = order
            .iter()
            .map(|&(i, _)| {
                let c = &chunks[i as usize];
                c.turns
                    .iter()
                    .zip(&c.parts)
                    .map(|(&at, part)| {
                        let evidence = records.evidence_at(at)?;
                        Ok(RenderTurn {
                            evidence,
                            also_cited: &[],
                            excerpt: Some(part.as_str()),
                            cut: None,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()
            })
            .collect::<anyhow::Result<_>>()?;
        budgets
            .iter()
            .map(|&budget| {
                let start = Instant::now();
                let budget = budget.map(|b| TokenBudget::new(u32::try_from(b).unwrap_or(u32::MAX)));
                let packed = pack_ranked(
                    &items,
                    budget,
                    self.settings.reader.as_ref(),
                    self.settings.layout,
                    PackPolicy::SkipWhatDoesNotFit,
                )?;
                let mut turns: Vec<TurnRef> = Vec::new();
                for &p in &packed.included {
                    for t in &chunks[order[p].0 as usize].turns {
                        if !turns.contains(t) {
                            turns.push(*t);
                        }
                    }
                }
                Ok(SystemOutput {
                    ranking: Ranking { turns, sessions: None, corpus: RankingCorpus::AllTurns },
                    tokens_used: packed.tokens,
                    stages: vec![
                        ("chunk", chunking),
                        ("chunk_embed", embed),
                        ("index", index),
                        ("retrieve", retrieve),
                        ("pack", start.elapsed()),
                    ],
                    text: packed.text,
                    ..SystemOutput::default()
                })
            })
            .collect()
    }
}
