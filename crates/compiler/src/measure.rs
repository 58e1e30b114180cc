//! What packing measures of a candidate turn, once per compile: the copies its line cites, its
//! line's tokens, its text's tokens and its session header's tokens. What never changes for a
//! turn (its text's, its header's and its prefix's tokens when it cites no copies,
//! [`TurnTokens`]) is counted once and cached in the corpus by position, so that measuring a
//! cached turn reads one entry instead of rendering and looking up its lines. A compile that
//! searches its lists on two threads measures the dense lists' turns on the dense thread before
//! it joins the lexical lists ([`Premeasured::add`]), so that the pack finds them measured.

use std::{
    collections::{HashMap, hash_map::Entry},
    sync::{PoisonError, RwLockReadGuard},
};

use evicortex_core::TurnId;

use crate::{
    Admission, CompileInputs, Corpus, DedupPolicy, Layout, RankedList, ReaderTokenizer,
    ReaderTokenizerError,
    reader_tokens::{LineCachedCount, LineCounts},
    render::{RenderTurn, layout_header, layout_prefix},
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

/// The reader-token counts of a turn that depend on the turn alone, the header and prefix in
/// each layout (by [`Layout::index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TurnTokens {
    /// Its text.
    pub(crate) text: u32,
    /// Its session's header, made for it as the session's first rendered turn.
    pub(crate) header: [u32; Layout::ALL.len()],
    /// Its citation prefix citing no copies, under the header its session is expected to get
    /// ([`expected_header_time`]).
    pub(crate) prefix: [u32; Layout::ALL.len()],
}

/// The time a session header over the turn at `pos` is assumed to show when its line is
/// measured: the turn's own. A line counted once is cached by position, so the assumption must
/// not depend on other turns (a session's first turn changes when an earlier turn arrives late,
/// and a warm memory would then rank what a fresh one ranks differently). In the compact layout
/// a line under a header of another time renders a few tokens more than measured: the exact fit
/// counts the rendered block, so the budget holds.
pub(crate) fn expected_header_time(corpus: &Corpus, pos: usize) -> evicortex_core::EventTime {
    corpus.at(pos).turn.time
}

/// `pos`'s [`TurnTokens`] counted by `reader`.
pub(crate) fn count_turn(
    corpus: &Corpus,
    reader: &dyn ReaderTokenizer,
    pos: usize,
) -> Result<TurnTokens, ReaderTokenizerError> {
    let e = corpus.at(pos);
    let count = |text: &str| reader.count(text).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let mut header = [0; Layout::ALL.len()];
    let mut prefix = [0; Layout::ALL.len()];
    for layout in Layout::ALL {
        let at = expected_header_time(corpus, pos);
        header[layout.index()] =
            count(&layout_header(layout, e.turn.session.as_str(), e.turn.time))?;
        prefix[layout.index()] = count(&layout_prefix(layout, &RenderTurn::whole(e, &[]), at))?;
    }
    Ok(TurnTokens { text: count(&e.turn.text)?, header, prefix })
}

/// Reader-token counts a compile made that the corpus's caches did not hold, added to them after
/// the pack ([`Corpus::add_counts`]).
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// By position.
    pub(crate) turns: HashMap<usize, TurnTokens>,
    pub(crate) lines: LineCounts,
}

/// The corpus's count caches under read locks, so that compiles of one namespace count side by
/// side.
pub(crate) struct CountCaches<'c> {
    turns: RwLockReadGuard<'c, HashMap<String, Vec<Option<TurnTokens>>>>,
    lines: RwLockReadGuard<'c, HashMap<String, LineCounts>>,
}

impl<'c> CountCaches<'c> {
    pub(crate) fn read(corpus: &'c Corpus) -> CountCaches<'c> {
        CountCaches {
            turns: corpus.turn_tokens.read().unwrap_or_else(PoisonError::into_inner),
            lines: corpus.line_tokens.read().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Counters in `reader`'s tokens over these caches, starting from `start` (counts this
    /// compile made already): the turns', and the lines' when `reader` is additive at line
    /// starts (see [`LineCachedCount`]).
    pub(crate) fn counters<'a>(
        &'a self,
        reader: &'a dyn ReaderTokenizer,
        start: Counts,
    ) -> (TurnCounts<'a>, Option<LineCachedCount<'a>>) {
        let name = reader.name();
        let turns =
            TurnCounts { shared: self.turns.get(name).map(Vec::as_slice), fresh: start.turns };
        let lines = LineCachedCount::new(reader, self.lines.get(name))
            .map(|counter| counter.starting_from(start.lines));
        (turns, lines)
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

/// Turn counts by position: the corpus's shared cache, then those counted here.
pub(crate) struct TurnCounts<'a> {
    shared: Option<&'a [Option<TurnTokens>]>,
    fresh: HashMap<usize, TurnTokens>,
}

impl TurnCounts<'_> {
    fn get(&self, pos: usize) -> Option<TurnTokens> {
        let shared = self.shared.and_then(|shared| shared.get(pos).copied().flatten());
        shared.or_else(|| self.fresh.get(&pos).copied())
    }

    /// What these counters counted.
    pub(crate) fn into_counts(self, lines: Option<LineCachedCount<'_>>) -> Counts {
        Counts {
            turns: self.fresh,
            lines: lines.map(LineCachedCount::into_fresh).unwrap_or_default(),
        }
    }
}

/// Measures the turn at `pos` as a compile under `admission` renders it in `layout`; `reader`
/// counts lines.
pub(crate) fn measure_turn(
    corpus: &Corpus,
    admission: &Admission<'_>,
    dedup: DedupPolicy,
    layout: Layout,
    reader: &dyn ReaderTokenizer,
    turns: &mut TurnCounts<'_>,
    pos: usize,
) -> Result<Measured, ReaderTokenizerError> {
    let also_cited = also_cited(corpus, admission, dedup, pos);
    let counted = match turns.get(pos) {
        Some(counted) => counted,
        None => {
            let counted = count_turn(corpus, reader, pos)?;
            turns.fresh.insert(pos, counted);
            counted
        }
    };
    let prefix = if also_cited.is_empty() {
        counted.prefix[layout.index()]
    } else {
        let e = corpus.at(pos);
        let at = expected_header_time(corpus, pos);
        let prefix = layout_prefix(layout, &RenderTurn::whole(e, &also_cited), at);
        u32::try_from(reader.count(&prefix)?).unwrap_or(u32::MAX)
    };
    Ok(Measured {
        also_cited,
        tokens: prefix.saturating_add(counted.text).saturating_add(1),
        text_tokens: counted.text,
        header: counted.header[layout.index()] as usize,
    })
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
        layout: Layout,
        admission: &Admission<'_>,
        lists: &[RankedList],
    ) -> Result<(), ReaderTokenizerError> {
        let corpus = inputs.corpus;
        let caches = CountCaches::read(corpus);
        let (mut turns, lines) = caches.counters(inputs.reader, std::mem::take(&mut self.counts));
        let reader = line_reader(&lines, inputs.reader);
        for hit in lists.iter().flat_map(|list| &list.hits) {
            let Some(pos) = admission.position(hit.key) else { continue };
            if let Entry::Vacant(slot) = self.turns.entry(pos) {
                slot.insert(measure_turn(
                    corpus, admission, dedup, layout, reader, &mut turns, pos,
                )?);
            }
        }
        self.counts = turns.into_counts(lines);
        Ok(())
    }
}
