//! Which texts the embedding cache received lately, by write generation. A compile that looked
//! its namespace's unembedded turns up at generation G looks up again only the turns whose texts
//! were written since, not every unembedded turn: with a backlog of 100,000 turns and the
//! background embedder writing, each compile of a 100k-turn namespace spent about a second
//! looking up vectors that were not there.

use std::{
    collections::{HashSet, VecDeque},
    sync::{Mutex, PoisonError},
};

use evicortex_core::TextDigest;

/// Texts kept in the log; a reader whose last lookup is older than what the log still holds
/// looks everything up again.
pub(crate) const RETAINED_TEXTS: usize = 1 << 18;

/// The texts of the last writes (vectors or refusals) through one embedding-cache handle.
#[derive(Debug, Default)]
pub(crate) struct WriteLog {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    /// The generation of the last recorded write (0: none yet).
    generation: u64,
    /// Recent writes, oldest first: (generation, texts).
    entries: VecDeque<(u64, Vec<TextDigest>)>,
    /// Texts held in `entries`.
    retained: usize,
    /// The newest generation dropped from `entries`.
    dropped_up_to: u64,
}

impl WriteLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The generation of the last write: unchanged since a lookup means nothing new to find.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Records a committed write of `texts` as the next generation.
    pub(crate) fn record(&self, texts: Vec<TextDigest>) {
        let mut state = self.lock();
        state.generation += 1;
        let generation = state.generation;
        state.retained += texts.len();
        state.entries.push_back((generation, texts));
        while state.retained > RETAINED_TEXTS && state.entries.len() > 1 {
            let (dropped, texts) = state.entries.pop_front().expect("more than one entry");
            state.retained -= texts.len();
            state.dropped_up_to = dropped;
        }
    }

    /// The texts written after generation `since`, or `None` when the log no longer holds all
    /// of them.
    pub(crate) fn written_since(&self, since: u64) -> Option<HashSet<TextDigest>> {
        let state = self.lock();
        if since < state.dropped_up_to {
            return None;
        }
        Some(
            state
                .entries
                .iter()
                .filter(|(generation, _)| *generation > since)
                .flat_map(|(_, texts)| texts.iter().copied())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(i: usize) -> TextDigest {
        TextDigest::of(&format!("text {i}"))
    }

    #[test]
    fn a_reader_gets_exactly_the_texts_written_since_its_generation() {
        let log = WriteLog::default();
        assert_eq!(log.generation(), 0);
        assert_eq!(log.written_since(0), Some(HashSet::new()));
        log.record(vec![text(1), text(2)]);
        let seen = log.generation();
        log.record(vec![text(3)]);
        log.record(vec![text(4), text(1)]);
        assert_eq!(log.generation(), 3);
        assert_eq!(log.written_since(seen), Some([text(3), text(4), text(1)].into()));
        assert_eq!(log.written_since(0).map(|s| s.len()), Some(4));
        assert_eq!(log.written_since(3), Some(HashSet::new()));
    }

    #[test]
    fn a_reader_older_than_the_log_is_told_to_look_everything_up() {
        let log = WriteLog::default();
        let batch = RETAINED_TEXTS / 2 + 1;
        for round in 0..3 {
            log.record((0..batch).map(|i| text(round * batch + i)).collect());
        }
        assert_eq!(log.written_since(0), None, "the first write was dropped");
        assert_eq!(log.written_since(1), None, "so was the second");
        assert_eq!(log.written_since(2).map(|s| s.len()), Some(batch), "the third is kept");
    }
}
