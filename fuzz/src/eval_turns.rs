//! What an accepted benchmark file must allow: every question's turns become ledger turns.

use evicortex::SessionId;
use evicortex_eval::eval_question::EvalQuestion;
use evicortex_eval::eval_store::event_time;

/// The conversion `EvalStore::ingest` applies to each turn (without a store): the session id
/// must be valid and the time representable (`event_time` panics otherwise).
pub fn check(question: &EvalQuestion) {
    assert!(question.admitted().count() <= question.turns.len());
    for turn in &question.turns {
        SessionId::new(&turn.session)
            .unwrap_or_else(|e| panic!("an accepted file has an invalid session id: {e}"));
        let _ = event_time(turn.time);
        assert!(u32::try_from(turn.at.turn).is_ok(), "turn number {} overflows", turn.at.turn);
    }
    if let Some(as_of) = question.as_of {
        let _ = event_time(as_of);
    }
}
