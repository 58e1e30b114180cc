//! What a system hands to scoring for one question: its evidence, best first, after packing.

/// A turn of the question's haystack, by position (session index in the haystack, turn index in
/// the session).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct TurnRef {
    /// Index of the session in the haystack (occurrences of a repeated id count separately).
    pub session: usize,
    /// Index of the turn in the session.
    pub turn: usize,
}

/// A system's ranked evidence for one question.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Ranking {
    /// Turns, best first: exactly what the system put in its context, in its rank order.
    pub turns: Vec<TurnRef>,
    /// Sessions best first, for systems that retrieve whole sessions (the released session-level
    /// BM25); when absent, session metrics widen the turn ranking to sessions.
    pub sessions: Option<Vec<usize>>,
    /// Which turns the system could rank: the released retriever sees user turns only; every
    /// other system sees all turns. The ideal DCG of the session widening counts the relevant
    /// turns of that corpus.
    pub corpus: RankingCorpus,
}

/// The turns a system ranks from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum RankingCorpus {
    /// Every turn, any role.
    #[default]
    AllTurns,
    /// User turns only (the released BM25).
    UserTurns,
}
