//! The filters applied inside candidate generation: namespace, as-of time, not erased.

use evicortex_core::TurnId;
use serde::{Deserialize, Serialize};

use crate::Corpus;

/// Why a record was not admitted as a candidate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterReason {
    /// Said after the query's as-of time.
    AfterAsOf,
    /// Erased from the ledger.
    Erased,
    /// Belongs to another namespace.
    OtherNamespace,
    /// Not in the corpus (an index row the ledger no longer has, e.g. erased and removed).
    UnknownRecord,
}

impl std::fmt::Display for FilterReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FilterReason::AfterAsOf => "said after the as-of time",
            FilterReason::Erased => "erased",
            FilterReason::OtherNamespace => "another namespace",
            FilterReason::UnknownRecord => "not in the ledger",
        })
    }
}

/// The admission test for one query. Indexes call [`Admission::admits`] on every matching record
/// before their top-N cut, so a filtered record never displaces an admitted one.
#[derive(Copy, Clone, Debug)]
pub struct Admission<'c> {
    corpus: &'c Corpus,
    as_of_micros: Option<i64>,
}

impl<'c> Admission<'c> {
    /// Admission into `corpus` for turns at or before `as_of_micros` (UTC microseconds).
    pub fn new(corpus: &'c Corpus, as_of_micros: Option<i64>) -> Admission<'c> {
        Admission { corpus, as_of_micros }
    }

    /// Whether `id` may be a candidate.
    #[inline]
    pub fn admits(&self, id: TurnId) -> bool {
        self.position(id).is_some()
    }

    /// The corpus position of `id` when admitted.
    #[inline]
    pub(crate) fn position(&self, id: TurnId) -> Option<usize> {
        let pos = self.corpus.position(id)?;
        let time = self.corpus.eligible_time_at(pos)?;
        self.as_of_micros.is_none_or(|t| time <= t).then_some(pos)
    }

    /// Whether the record at corpus position `pos` may be a candidate.
    #[inline]
    pub(crate) fn admits_at(&self, pos: usize) -> bool {
        let time = self.corpus.eligible_time_at(pos);
        time.is_some_and(|time| self.as_of_micros.is_none_or(|t| time <= t))
    }

    /// Why `id` is not admitted, or `None` if it is.
    pub fn reason(&self, id: TurnId) -> Option<FilterReason> {
        if self.corpus.is_erased(id) {
            return Some(FilterReason::Erased);
        }
        let Some(pos) = self.corpus.position(id) else { return Some(FilterReason::UnknownRecord) };
        if self.corpus.at(pos).turn.namespace != *self.corpus.namespace() {
            return Some(FilterReason::OtherNamespace);
        }
        if self.as_of_micros.is_some_and(|t| self.corpus.time_at(pos) > t) {
            return Some(FilterReason::AfterAsOf);
        }
        None
    }
}
