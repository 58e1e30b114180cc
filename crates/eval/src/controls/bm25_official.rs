//! The `bm25-official` control: the released LongMemEval BM25 retriever, one index per question
//! over user turns only, at session granularity (user turns of a session joined by one space)
//! and at turn granularity.

use crate::{
    controls::bm25_okapi::{Bm25Okapi, Bm25OkapiParams},
    datasets::longmemeval::Question,
    ranking::{Ranking, RankingCorpus, TurnRef},
};
use evicortex::Role;

/// Ranks the sessions and the user turns of `question` for its own question text.
pub fn rank_bm25_official(question: &Question, params: Bm25OkapiParams) -> Ranking {
    let session_texts: Vec<String> = question
        .sessions
        .iter()
        .map(|s| {
            let users: Vec<&str> = s
                .turns
                .iter()
                .filter(|t| t.role == Role::User)
                .map(|t| t.content.as_str())
                .collect();
            users.join(" ")
        })
        .collect();
    let sessions = Bm25Okapi::new(session_texts.iter().map(String::as_str), params)
        .ranking(&question.question);
    let user_turns: Vec<TurnRef> = question
        .sessions
        .iter()
        .enumerate()
        .flat_map(|(s, session)| {
            session
                .turns
                .iter()
                .enumerate()
                .filter(|(_, t)| t.role == Role::User)
                .map(move |(t, _)| TurnRef { session: s, turn: t })
        })
        .collect();
    let turn_index = Bm25Okapi::new(
        user_turns.iter().map(|r| question.sessions[r.session].turns[r.turn].content.as_str()),
        params,
    );
    let turns = turn_index.ranking(&question.question).into_iter().map(|i| user_turns[i]).collect();
    Ranking { turns, sessions: Some(sessions), corpus: RankingCorpus::UserTurns }
}
