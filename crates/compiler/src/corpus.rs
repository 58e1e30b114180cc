//! One namespace's evidence as the compiler sees it: records by ledger id, with the tables that
//! filters, dedup and expansion need precomputed.

use std::{
    collections::{HashMap, HashSet},
    sync::{OnceLock, PoisonError, RwLock},
};

use evicortex_core::{EventTime, Evidence, Namespace, SessionId, TurnId};

use crate::{
    CorpusError, Layout, ReaderTokenizer, ReaderTokenizerError,
    measure::{TurnTokens, count_turn, expected_header_time},
    reader_tokens::{LineCounts, lines_with_digests},
    render::{PREAMBLE, RenderTurn, layout_header, layout_prefix},
    turn_document,
};

/// The evidence of one namespace, sorted by ledger id, plus lookup tables. Built once per ledger
/// position and reused across questions (the memory facade caches it); [`Corpus::push`] extends it
/// as turns arrive.
///
/// Evidence of another namespace may be present (it is never admitted); erased records are either
/// absent or listed in `erased` (never admitted, reported as erased).
#[derive(Debug)]
pub struct Corpus {
    namespace: Namespace,
    evidence: Vec<Evidence>,
    positions: PositionTable,
    erased: HashSet<TurnId>,
    /// Per position: the event time if in the corpus's namespace and not erased, else
    /// [`INELIGIBLE`].
    eligible_times: Vec<i64>,
    /// Per position: event time, UTC microseconds.
    times: Vec<i64>,
    /// Per position: index into `groups` (documents equal up to whitespace).
    group_of: Vec<u32>,
    /// Positions per text group, in (event time, ledger id) order.
    groups: Vec<Vec<u32>>,
    group_ids: HashMap<[u8; 32], u32>,
    /// Positions per session, in (turn index, ledger id) order.
    sessions: Vec<Vec<u32>>,
    session_ids: HashMap<SessionId, u32>,
    /// Per position: index into `sessions`. A context list looks up the sessions of hundreds of
    /// records per compile; hashing each session name cost more than scoring their windows.
    session_at: Vec<u32>,
    /// Per position: the turn index, so a session's order is searched without reading records.
    turn_at: Vec<u32>,
    /// The distinct speaker names of eligible records, in order of first appearance.
    speakers: Vec<String>,
    /// The latest event time of an eligible record.
    latest: Option<EventTime>,
    /// Per tokenizer name, per position: the reader-token counts of what packing measures of a
    /// turn that never changes ([`TurnTokens`]); deterministic, so caching them does not change
    /// results. Read-locked for a whole pack, so that compiles of one namespace pack side by
    /// side; what a pack counts is added under the write lock after it.
    pub(crate) turn_tokens: RwLock<HashMap<String, Vec<Option<TurnTokens>>>>,
    /// Reader-token counts of rendered lines by BLAKE3 digest, per tokenizer name (see
    /// [`crate::reader_tokens::LineCachedCount`]), locked like `turn_tokens`.
    pub(crate) line_tokens: RwLock<HashMap<String, LineCounts>>,
    /// Per position: the earliest eligible time at or after it (`i64::MAX` where none), so
    /// that the last position an as-of time admits is a binary search away; made by the first
    /// compile with an as-of time after a change.
    earliest_from: OnceLock<Vec<i64>>,
}

/// Rendered lines' counts a corpus carries across an erasure, per record it holds: a record
/// renders 16 lines that [`Corpus::precount_text_tokens`] counts (a few more where its text holds
/// several); a cache beyond this holds lines of renderings that no longer occur, and starts over.
const LINES_KEPT_PER_RECORD: usize = 64;

impl Corpus {
    /// Assembles the corpus of `namespace` from `evidence` (any order) and the ids of erased
    /// records.
    pub fn new(
        namespace: Namespace,
        mut evidence: Vec<Evidence>,
        erased: impl IntoIterator<Item = TurnId>,
    ) -> Result<Corpus, CorpusError> {
        evidence.sort_by_key(|e| e.id);
        if let Some(pair) = evidence.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(CorpusError::DuplicateRecord { record: pair[0].id });
        }
        let keys = evidence.iter().map(|e| dedup_key(&turn_document(&e.turn))).collect();
        Ok(Corpus::assemble(namespace, evidence, keys, erased))
    }

    /// The corpus of `evidence` (sorted by id, no id twice) whose documents' dedup keys are
    /// `keys`.
    fn assemble(
        namespace: Namespace,
        evidence: Vec<Evidence>,
        keys: Vec<[u8; 32]>,
        erased: impl IntoIterator<Item = TurnId>,
    ) -> Corpus {
        let mut corpus = Corpus {
            namespace,
            evidence: Vec::with_capacity(evidence.len()),
            positions: PositionTable::Dense { first: 0, slots: Vec::new() },
            erased: erased.into_iter().collect(),
            eligible_times: Vec::new(),
            times: Vec::new(),
            group_of: Vec::new(),
            groups: Vec::new(),
            group_ids: HashMap::new(),
            sessions: Vec::new(),
            session_ids: HashMap::new(),
            session_at: Vec::new(),
            turn_at: Vec::new(),
            speakers: Vec::new(),
            latest: None,
            turn_tokens: RwLock::new(HashMap::new()),
            line_tokens: RwLock::new(HashMap::new()),
            earliest_from: OnceLock::new(),
        };
        corpus.positions = PositionTable::for_ids(evidence.iter().map(|e| e.id));
        for (e, key) in evidence.into_iter().zip(keys) {
            corpus.positions.insert(e.id, corpus.evidence.len() as u32);
            corpus.index_record(e, key);
        }
        corpus
    }

    /// Appends a record newer than every record held.
    pub fn push(&mut self, evidence: Evidence) -> Result<(), CorpusError> {
        if let Some(last) = self.evidence.last()
            && evidence.id <= last.id
        {
            return Err(if self.position(evidence.id).is_some() {
                CorpusError::DuplicateRecord { record: evidence.id }
            } else {
                CorpusError::OutOfOrder { record: evidence.id, last: last.id }
            });
        }
        self.positions.insert(evidence.id, self.evidence.len() as u32);
        let key = dedup_key(&turn_document(&evidence.turn));
        self.index_record(evidence, key);
        self.earliest_from = OnceLock::new();
        Ok(())
    }

    /// This corpus without the records `erased`: what [`Corpus::new`] makes of the others, the
    /// positions of later records moved down. Their dedup keys and reader-token counts come
    /// along (each depends on the record alone), and so do the rendered lines' counts, less
    /// the lines that render an erased record or cite it.
    pub fn without(&self, erased: &HashSet<TurnId>) -> Corpus {
        let kept: Vec<bool> = self.evidence.iter().map(|e| !erased.contains(&e.id)).collect();
        let mut key_of_group = vec![[0u8; 32]; self.groups.len()];
        for (key, &group) in &self.group_ids {
            key_of_group[group as usize] = *key;
        }
        let (mut evidence, mut keys) = (Vec::new(), Vec::new());
        for (pos, e) in self.evidence.iter().enumerate().filter(|&(pos, _)| kept[pos]) {
            evidence.push(e.clone());
            keys.push(key_of_group[self.group_of[pos] as usize]);
        }
        let still_erased = self.erased.iter().copied().filter(|id| !erased.contains(id));
        let corpus = Corpus::assemble(self.namespace.clone(), evidence, keys, still_erased);
        let counted = self.turn_tokens.read().unwrap_or_else(PoisonError::into_inner);
        let carried = counted.iter().map(|(tokenizer, counts)| {
            let mut keep = kept.iter();
            let mut counts = counts.clone();
            counts.retain(|_| keep.next().copied().unwrap_or(false));
            (tokenizer.clone(), counts)
        });
        *corpus.turn_tokens.write().unwrap_or_else(PoisonError::into_inner) = carried.collect();
        let lines = self.line_tokens.read().unwrap_or_else(PoisonError::into_inner);
        if !lines.is_empty() {
            let stale = self.stale_lines(&kept);
            let bound = LINES_KEPT_PER_RECORD * corpus.len().max(1);
            let carried = lines.iter().filter(|(_, counts)| counts.len() <= bound).map(
                |(tokenizer, counts)| {
                    let mut counts = counts.clone();
                    counts.retain(|digest, _| !stale.contains(digest));
                    (tokenizer.clone(), counts)
                },
            );
            *corpus.line_tokens.write().unwrap_or_else(PoisonError::into_inner) = carried.collect();
        }
        corpus
    }

    /// Digests of the rendered lines that leave with the records not `kept`: each one's lines,
    /// and those of its copies (whose lines cite it). Lines rendered otherwise (under an as-of
    /// time) are not found here; [`LINES_KEPT_PER_RECORD`] bounds what they leave behind.
    /// Carrying the rest matters: under a steady stream of erasures, counting every line again
    /// after each one took a tenth of a busy server's time.
    fn stale_lines(&self, kept: &[bool]) -> HashSet<[u8; 32]> {
        let mut touched: Vec<usize> = (0..kept.len())
            .filter(|&pos| !kept[pos])
            .flat_map(|pos| self.text_group(pos).iter().map(|&p| p as usize))
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let rendered: Vec<String> =
            touched.into_iter().flat_map(|pos| self.rendered_lines(pos)).collect();
        lines_with_digests(rendered.iter().map(String::as_str))
            .into_iter()
            .map(|(d, _)| d)
            .collect()
    }

    fn index_record(&mut self, e: Evidence, key: [u8; 32]) {
        let pos = self.evidence.len() as u32;
        let eligible = e.turn.namespace == self.namespace && !self.erased.contains(&e.id);
        let time = e.turn.time.utc_micros();
        self.eligible_times.push(if eligible { time } else { INELIGIBLE });
        self.times.push(time);
        if eligible {
            if self.latest.is_none_or(|t| t.utc_micros() < time) {
                self.latest = Some(e.turn.time);
            }
            if let Some(speaker) = &e.turn.speaker
                && !self.speakers.contains(speaker)
            {
                self.speakers.push(speaker.clone());
            }
        }
        let next = self.groups.len() as u32;
        let group = *self.group_ids.entry(key).or_insert(next);
        if group == next {
            self.groups.push(Vec::new());
        }
        self.group_of.push(group);
        // Both lists stay sorted by inserting at the new record's place (usually the end):
        // sorting them again at every push made a burst of appends to a long session quadratic
        // (compiles right after 53k appends to four sessions took up to 37.6 s).
        let members = &mut self.groups[group as usize];
        let times = &self.times;
        let evidence = &self.evidence;
        let key = (time, e.id);
        let at = members.partition_point(|&p| (times[p as usize], evidence[p as usize].id) < key);
        members.insert(at, pos);
        let next = self.sessions.len() as u32;
        let session = *self.session_ids.entry(e.turn.session.clone()).or_insert(next);
        if session == next {
            self.sessions.push(Vec::new());
        }
        self.session_at.push(session);
        self.turn_at.push(e.turn.turn.raw());
        // Positions follow ledger ids, so (turn index, position) orders as (turn index, id).
        let turn_at = &self.turn_at;
        let key = (e.turn.turn.raw(), pos);
        let members = &mut self.sessions[session as usize];
        let at = members.partition_point(|&p| (turn_at[p as usize], p) < key);
        members.insert(at, pos);
        self.evidence.push(e);
    }

    /// The namespace this corpus answers for.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// Every record, by ledger id.
    pub fn evidence(&self) -> &[Evidence] {
        &self.evidence
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.evidence.len()
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.evidence.is_empty()
    }

    /// The highest ledger id held.
    pub fn last_record(&self) -> Option<TurnId> {
        self.evidence.last().map(|e| e.id)
    }

    /// The record with ledger id `id`.
    pub fn get(&self, id: TurnId) -> Option<&Evidence> {
        self.position(id).map(|p| &self.evidence[p])
    }

    /// The distinct speaker names of the namespace's live records, in order of first appearance.
    pub fn speakers(&self) -> &[String] {
        &self.speakers
    }

    /// The latest event time of the namespace's live records.
    pub(crate) fn latest_time(&self) -> Option<EventTime> {
        self.latest
    }

    /// The last position of an eligible record said at or before `as_of_micros`.
    pub(crate) fn last_admitted_position(&self, as_of_micros: i64) -> Option<usize> {
        let earliest_from = self.earliest_from.get_or_init(|| {
            let mut earliest = vec![i64::MAX; self.len()];
            let mut min = i64::MAX;
            for pos in (0..self.len()).rev() {
                min = self.eligible_time_at(pos).map_or(min, |t| min.min(t));
                earliest[pos] = min;
            }
            earliest
        });
        // Non-decreasing: the positions with an admitted record at or after them come first.
        earliest_from.partition_point(|&t| t <= as_of_micros).checked_sub(1)
    }

    /// The index of the session of the record at `pos` among the corpus's sessions.
    #[inline]
    pub(crate) fn session_index(&self, pos: usize) -> u32 {
        self.session_at[pos]
    }

    /// Whether `id` was declared erased.
    pub fn is_erased(&self, id: TurnId) -> bool {
        self.erased.contains(&id)
    }

    /// Counts in `reader` what packing measures of the live records at `positions` (clamped to
    /// the corpus) that packing has not counted yet (each turn's text, session header and
    /// citation prefix, `TurnTokens`), as packing counts them, and caches the counts; returns
    /// how many turns it counted. A compile then finds them cached: the memory facade runs this
    /// in the background, a chunk of positions at a time, so that a big namespace's compiles stop
    /// paying for cold counts. The turns are counted without holding the cache's lock.
    ///
    /// For a tokenizer additive at line starts, the lines packing counts for each of those turns
    /// are counted too, as a compile without an as-of time renders them: its citation prefix, its
    /// session header, and its line inside a rendered block (followed by another turn, or by the
    /// next session's header), and the preamble. A compile that renders a turn otherwise (another session date,
    /// other copies cited) counts its own lines, as before; a count cached by line content is
    /// right whichever compile meets the line.
    pub fn precount_text_tokens(
        &self,
        reader: &dyn ReaderTokenizer,
        positions: std::ops::Range<usize>,
    ) -> Result<usize, ReaderTokenizerError> {
        let positions = positions.start.min(self.len())..positions.end.min(self.len());
        let missing: Vec<usize> = {
            let caches = self.turn_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let cached = caches.get(reader.name());
            positions
                .filter(|&pos| self.eligible_time_at(pos).is_some())
                .filter(|&pos| cached.is_none_or(|c| c.get(pos).is_none_or(Option::is_none)))
                .collect()
        };
        let mut counts = Vec::with_capacity(missing.len());
        for &pos in &missing {
            counts.push((pos, count_turn(self, reader, pos)?));
        }
        let mut lines = LineCounts::default();
        if reader.additive_at_line_starts() && !missing.is_empty() {
            // Every block starts with the preamble, which the plan also counts alone.
            let preamble = [PREAMBLE.to_owned(), format!("{PREAMBLE}\n")];
            let rendered: Vec<String> =
                missing.iter().flat_map(|&pos| self.rendered_lines(pos)).chain(preamble).collect();
            let pieces = lines_with_digests(rendered.iter().map(String::as_str));
            let new: Vec<([u8; 32], &str)> = {
                let caches =
                    self.line_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                let cached = caches.get(reader.name());
                pieces
                    .into_iter()
                    .filter(|(d, _)| cached.is_none_or(|c| !c.contains_key(d)))
                    .collect()
            };
            for (digest, line) in new {
                if let std::collections::hash_map::Entry::Vacant(slot) = lines.entry(digest) {
                    slot.insert(u32::try_from(reader.count(line)?).unwrap_or(u32::MAX));
                }
            }
        }
        self.add_counts(reader.name(), counts, lines);
        Ok(missing.len())
    }

    /// What packing renders and counts for the turn at `pos` in a compile without an as-of time,
    /// in each layout: its citation prefix, its session header, and its line in a block
    /// (followed by another turn, then by another session's header).
    fn rendered_lines(&self, pos: usize) -> Vec<String> {
        let e = &self.evidence[pos];
        let also: Vec<TurnId> = self
            .text_group(pos)
            .iter()
            .map(|&p| p as usize)
            .filter(|&p| p != pos && self.eligible_time_at(p).is_some())
            .map(|p| self.evidence[p].id)
            .collect();
        let mut lines = Vec::with_capacity(4 * Layout::ALL.len());
        for layout in Layout::ALL {
            let at = expected_header_time(self, pos);
            let prefix = layout_prefix(layout, &RenderTurn::whole(e, &also), at);
            let line = format!("{prefix}{}\n", e.turn.text);
            let before_header = format!("{line}\n");
            let header = layout_header(layout, e.turn.session.as_str(), e.turn.time);
            lines.extend([prefix, header, line, before_header]);
        }
        lines
    }

    /// Adds reader-token counts of turns (by position) and of rendered lines, each cache under
    /// its write lock (held by no caller: a pack drops its read locks first).
    pub(crate) fn add_counts(
        &self,
        reader_name: &str,
        turns: impl IntoIterator<Item = (usize, TurnTokens)>,
        lines: LineCounts,
    ) {
        let mut turns = turns.into_iter().peekable();
        if turns.peek().is_some() {
            let mut caches =
                self.turn_tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let cached = caches.entry(reader_name.to_owned()).or_default();
            for (pos, counted) in turns {
                if cached.len() <= pos {
                    cached.resize(self.len().max(pos + 1), None);
                }
                cached[pos] = Some(counted);
            }
        }
        if !lines.is_empty() {
            let mut caches =
                self.line_tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            caches.entry(reader_name.to_owned()).or_default().extend(lines);
        }
    }

    /// How many rendered lines have their count in `reader_name` cached.
    pub fn line_tokens_cached(&self, reader_name: &str) -> usize {
        let caches = self.line_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        caches.get(reader_name).map_or(0, HashMap::len)
    }

    /// How many turns have their counts in `reader_name` cached.
    pub fn text_tokens_cached(&self, reader_name: &str) -> usize {
        let caches = self.turn_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        caches.get(reader_name).map_or(0, |cached| cached.iter().flatten().count())
    }

    /// The position of `id` (the position table is exact: no id shares a slot).
    #[inline]
    pub(crate) fn position(&self, id: TurnId) -> Option<usize> {
        self.positions.get(id).map(|p| p as usize)
    }

    /// The event time at `pos` (UTC microseconds) if the record there is eligible (in the
    /// namespace, not erased). One array, so the per-candidate filter touches one cache line.
    #[inline]
    pub(crate) fn eligible_time_at(&self, pos: usize) -> Option<i64> {
        let t = self.eligible_times[pos];
        (t != INELIGIBLE).then_some(t)
    }

    pub(crate) fn time_at(&self, pos: usize) -> i64 {
        self.times[pos]
    }

    pub(crate) fn at(&self, pos: usize) -> &Evidence {
        &self.evidence[pos]
    }

    /// Positions of records whose document (speaker and text) equals the one at `pos` (up to
    /// whitespace), earliest first.
    pub(crate) fn text_group(&self, pos: usize) -> &[u32] {
        &self.groups[self.group_of[pos] as usize]
    }

    /// Positions of the session of the record at `pos`, by turn index.
    pub(crate) fn session_of(&self, pos: usize) -> &[u32] {
        &self.sessions[self.session_at[pos] as usize]
    }

    /// Where the record at `pos` stands in [`Corpus::session_of`] its session.
    pub(crate) fn place_in_session(&self, pos: usize) -> usize {
        let key = (self.turn_at[pos], pos as u32);
        self.session_of(pos).partition_point(|&p| (self.turn_at[p as usize], p) < key)
    }
}

/// The dedup key: BLAKE3 of a turn's document trimmed, with every run of whitespace replaced by
/// one space.
pub(crate) fn dedup_key(text: &str) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    let mut first = true;
    for word in text.split_whitespace() {
        if !first {
            hasher.update(b" ");
        }
        hasher.update(word.as_bytes());
        first = false;
    }
    *hasher.finalize().as_bytes()
}

/// Ledger id to position: a dense array when ids are close together (the usual case: a namespace
/// ingested in batches), a hash map when they are scattered across a shared ledger.
#[derive(Debug)]
enum PositionTable {
    Dense { first: u64, slots: Vec<u32> },
    Sparse(HashMap<TurnId, u32>),
}

const NO_POSITION: u32 = u32::MAX;

/// Marks an ineligible record in `eligible_times` (no event time is `i64::MAX` microseconds).
const INELIGIBLE: i64 = i64::MAX;

impl PositionTable {
    fn for_ids(ids: impl Iterator<Item = TurnId> + Clone) -> PositionTable {
        let count = ids.clone().count() as u64;
        let (min, max) =
            ids.fold((u64::MAX, 0), |(lo, hi), id| (lo.min(id.raw()), hi.max(id.raw())));
        if count == 0 || max - min < 4 * count + 1024 {
            let first = if count == 0 { 0 } else { min };
            PositionTable::Dense { first, slots: Vec::new() }
        } else {
            PositionTable::Sparse(HashMap::with_capacity(count as usize))
        }
    }

    fn get(&self, id: TurnId) -> Option<u32> {
        match self {
            PositionTable::Dense { first, slots } => {
                let slot = id.raw().checked_sub(*first)?;
                slots.get(usize::try_from(slot).ok()?).copied().filter(|&p| p != NO_POSITION)
            }
            PositionTable::Sparse(map) => map.get(&id).copied(),
        }
    }

    fn insert(&mut self, id: TurnId, pos: u32) {
        match self {
            PositionTable::Dense { first, slots } => {
                if slots.is_empty() && *first == 0 {
                    *first = id.raw();
                }
                match id.raw().checked_sub(*first) {
                    Some(slot) if slot < 4 * slots.len() as u64 + (1 << 20) => {
                        let slot = slot as usize;
                        if slot >= slots.len() {
                            slots.resize(slot + 1, NO_POSITION);
                        }
                        slots[slot] = pos;
                    }
                    _ => {
                        // Too scattered (or below the first id): switch to the map.
                        let mut map: HashMap<TurnId, u32> = slots
                            .iter()
                            .enumerate()
                            .filter(|(_, p)| **p != NO_POSITION)
                            .map(|(slot, p)| (TurnId::from_raw(*first + slot as u64), *p))
                            .collect();
                        map.insert(id, pos);
                        *self = PositionTable::Sparse(map);
                    }
                }
            }
            PositionTable::Sparse(map) => {
                map.insert(id, pos);
            }
        }
    }
}

#[cfg(test)]
mod tests;
