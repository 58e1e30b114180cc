//! What packing measures of a candidate turn, once per compile: the copies its line cites, its
//! line's tokens, its text's tokens and its session header's tokens. A compile that searches its
//! lists on two threads measures the dense lists' turns, and the window list's once it is done,
//! on the dense thread while the lexical lists finish ([`Premeasured::add`]), so that the pack,
//! which waits for both, finds them measured.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::{PoisonError, RwLockReadGuard},
};

use evicortex_core::TurnId;

use crate::{
    Admission, CompileInputs, Corpus, DedupPolicy, RankedList, ReaderTokenizer,
    ReaderTokenizerError,
    reader_tokens::{LineCachedCount, LineCounts},
    render::{RenderTurn, session_header, turn_prefix},
};

/// A turn as packing counts it.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The admitted copies its line cites.
    pub(crate) also_cited: Vec<TurnId>,
    /// Its line: prefix, text and the closing newline, counted apart.
    pub(crate) tokens: u32,
    /// Its text alone, exactly.
    pub(crate) text_tokens: u32,
    /// Its session's header.
    pub(crate) header: usize,
}

/// Turns measured before the pack, with the counts made doing so.
#[derive(Debug, Default)]
pub(crate) struct Premeasured {
    pub(crate) turns: HashMap<usize, Measured>,
    pub(crate) counts: Counts,
}

/// Reader-token counts a compile made that the corpus's caches did not hold, added to them after
/// the pack ([`Corpus::add_counts`]).
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) texts: HashMap<TurnId, u32>,
    pub(crate) lines: LineCounts,
}

/// The corpus's count caches under read locks, so that compiles of one namespace count side by
/// side.
pub(crate) struct CountCaches<'c> {
    texts: RwLockReadGuard<'c, HashMap<String, HashMap<TurnId, u32>>>,
    lines: RwLockReadGuard<'c, HashMap<String, LineCounts>>,
}

impl<'c> CountCaches<'c> {
    pub(crate) fn read(corpus: &'c Corpus) -> CountCaches<'c> {
        CountCaches {
            texts: corpus.text_tokens.read().unwrap_or_else(PoisonError::into_inner),
            lines: corpus.line_tokens.read().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Counters in `reader`'s tokens over these caches, starting from `start` (counts this
    /// compile made already): the turn texts', and the lines' when `reader` is additive at line
    /// starts (see [`LineCachedCount`]).
    pub(crate) fn counters<'a>(
        &'a self,
        reader: &'a dyn ReaderTokenizer,
        start: Counts,
    ) -> (TextCounts<'a>, Option<LineCachedCount<'a>>) {
        let name = reader.name();
        let texts = TextCounts { shared: self.texts.get(name), fresh: start.texts };
        let lines = LineCachedCount::new(reader, self.lines.get(name))
            .map(|counter| counter.starting_from(start.lines));
        (texts, lines)
    }
}

/// What counts lines: the line counter where there is one, else the reader itself.
pub(crate) fn line_reader<'a>(
    lines: &'a Option<LineCachedCount<'a>>,
    reader: &'a dyn ReaderTokenizer,
) -> &'a dyn ReaderTokenizer {
    match lines {
        Some(cached) => cached,
        None => reader,
    }
}

/// Turn-text counts: the corpus's shared cache, then those counted here.
pub(crate) struct TextCounts<'a> {
    shared: Option<&'a HashMap<TurnId, u32>>,
    fresh: HashMap<TurnId, u32>,
}

impl TextCounts<'_> {
    fn get(&self, id: &TurnId) -> Option<&u32> {
        self.shared.and_then(|shared| shared.get(id)).or_else(|| self.fresh.get(id))
    }

    /// What these counters counted.
    pub(crate) fn into_counts(self, lines: Option<LineCachedCount<'_>>) -> Counts {
        Counts {
            texts: self.fresh,
            lines: lines.map(LineCachedCount::into_fresh).unwrap_or_default(),
        }
    }
}

/// Measures the turn at `pos` as a compile under `admission` renders it; `reader` counts lines.
pub(crate) fn measure_turn(
    corpus: &Corpus,
    admission: &Admission<'_>,
    dedup: DedupPolicy,
    reader: &dyn ReaderTokenizer,
    texts: &mut TextCounts<'_>,
    pos: usize,
) -> Result<Measured, ReaderTokenizerError> {
    let e = corpus.at(pos);
    let also_cited = also_cited(corpus, admission, dedup, pos);
    let date = e.turn.time.local_date();
    let prefix = turn_prefix(&RenderTurn::whole(e, &also_cited), &date);
    let text_tokens = match texts.get(&e.id) {
        Some(&n) => n,
        None => {
            let n = u32::try_from(reader.count(&e.turn.text)?).unwrap_or(u32::MAX);
            texts.fresh.insert(e.id, n);
            n
        }
    };
    let tokens = (reader.count(&prefix)? as u32).saturating_add(text_tokens).saturating_add(1);
    let header = reader.count(&session_header(e.turn.session.as_str(), &date))?;
    Ok(Measured { also_cited, tokens, text_tokens, header })
}

/// The admitted copies of the turn at `pos` that its line cites (none without dedup).
fn also_cited(
    corpus: &Corpus,
    admission: &Admission<'_>,
    dedup: DedupPolicy,
    pos: usize,
) -> Vec<TurnId> {
    if dedup == DedupPolicy::Off {
        return Vec::new();
    }
    let id = corpus.at(pos).id;
    corpus
        .text_group(pos)
        .iter()
        .map(|&p| corpus.at(p as usize).id)
        .filter(|&o| o != id && admission.admits(o))
        .collect()
}

impl Premeasured {
    /// Measures the admitted turns of `lists` not measured yet, as the pack would, under read
    /// locks of the corpus's count caches (as the pack takes them).
    pub(crate) fn add(
        &mut self,
        inputs: &CompileInputs<'_>,
        dedup: DedupPolicy,
        admission: &Admission<'_>,
        lists: &[RankedList],
    ) -> Result<(), ReaderTokenizerError> {
        let corpus = inputs.corpus;
        let caches = CountCaches::read(corpus);
        let (mut texts, lines) = caches.counters(inputs.reader, std::mem::take(&mut self.counts));
        let reader = line_reader(&lines, inputs.reader);
        for hit in lists.iter().flat_map(|list| &list.hits) {
            let Some(pos) = admission.position(hit.key) else { continue };
            if let Entry::Vacant(slot) = self.turns.entry(pos) {
                slot.insert(measure_turn(corpus, admission, dedup, reader, &mut texts, pos)?);
            }
        }
        self.counts = texts.into_counts(lines);
        Ok(())
    }
}
