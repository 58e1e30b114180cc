//! The operations both front ends (HTTP and MCP) offer, on validated input: append, erase,
//! namespace statistics, verify. Synchronous: callers run them on a blocking thread.

use evicortex::front_end::{TurnsNamespace, erase_target, turns_from_objects};
use evicortex::{EventTime, Memory, Namespace};
use serde_json::Value;

use crate::dto::{
    AppendRequest, AppendResponse, CompileRequest, EraseRequest, EraseResponse,
    NamespaceStatsResponse, NamespacesResponse, SessionSummary, SessionsResponse, VerifyResponse,
};
use crate::{ApiError, KeyScope, compile_request::Readers, facade_error};

/// Appends `request.turns` to `namespace` as one atomic, durable batch of at most `max_turns`.
/// The response comes once the batch is on disk; the memory embeds the turns afterwards.
pub fn append(
    memory: &Memory,
    namespace: &Namespace,
    request: AppendRequest,
    max_turns: usize,
) -> Result<AppendResponse, ApiError> {
    let fixed = TurnsNamespace::Fixed(namespace.clone());
    let turns = turns_from_objects(&request.turns, &fixed, max_turns)
        .map_err(|e| ApiError::invalid(e.field, e.reason))?;
    let receipt = memory.append(&turns).map_err(|e| facade_error(&e))?;
    Ok(AppendResponse::from(&receipt))
}

/// Erases the one target `request` names inside `namespace`.
pub fn erase(
    memory: &Memory,
    namespace: &Namespace,
    request: EraseRequest,
) -> Result<EraseResponse, ApiError> {
    let target = erase_target(namespace, request.session, request.record, request.all, "body")
        .map_err(|e| ApiError::invalid(e.field, e.reason))?;
    let receipt = memory.erase(&target).map_err(|e| facade_error(&e))?;
    Ok(EraseResponse::from(&receipt))
}

/// Compiles a cited context for `request` from `namespace`, as JSON.
pub fn compile(
    memory: &Memory,
    readers: &Readers,
    namespace: &Namespace,
    request: CompileRequest,
) -> Result<Value, ApiError> {
    let context = crate::compile_request::compile(memory, readers, namespace, request)?;
    // Through the text of `to_json`, not `to_value`: a Value widens f32 scores to f64 and would
    // print 0.41045793890953064 where `evicortex compile --json` prints 0.41045794.
    serde_json::from_str(&context.to_json())
        .map_err(|e| ApiError::Storage { message: format!("rendering the compiled context: {e}") })
}

/// Counts of `namespace` alone.
pub fn namespace_stats(
    memory: &Memory,
    namespace: &Namespace,
) -> Result<NamespaceStatsResponse, ApiError> {
    memory.namespace_stats(namespace).map_err(|e| facade_error(&e))
}

/// The namespaces `caller` may read: its own, or every namespace for an admin key.
pub fn namespaces(memory: &Memory, caller: &KeyScope) -> Result<NamespacesResponse, ApiError> {
    match caller {
        KeyScope::Namespace(own) => {
            Ok(NamespacesResponse { admin: false, namespaces: vec![own.to_string()] })
        }
        KeyScope::Admin => {
            let all = memory.namespaces().map_err(|e| facade_error(&e))?;
            Ok(NamespacesResponse {
                admin: true,
                namespaces: all.iter().map(ToString::to_string).collect(),
            })
        }
    }
}

/// The sessions of `namespace` alone, in order of their first turn's time.
pub fn sessions(memory: &Memory, namespace: &Namespace) -> Result<SessionsResponse, ApiError> {
    let evidence = memory.evidence(namespace).map_err(|e| facade_error(&e))?;
    let mut by_session: std::collections::BTreeMap<&str, (u64, EventTime, EventTime)> =
        std::collections::BTreeMap::new();
    for e in &evidence {
        let time = e.turn.time;
        by_session
            .entry(e.turn.session.as_str())
            .and_modify(|(turns, first, last)| {
                *turns += 1;
                if time.utc_micros() < first.utc_micros() {
                    *first = time;
                }
                if time.utc_micros() > last.utc_micros() {
                    *last = time;
                }
            })
            .or_insert((1, time, time));
    }
    let mut sessions: Vec<_> = by_session.into_iter().collect();
    sessions.sort_by_key(|(session, (_, first, _))| (first.utc_micros(), *session));
    Ok(SessionsResponse {
        namespace: namespace.to_string(),
        sessions: sessions
            .into_iter()
            .map(|(session, (turns, first, last))| SessionSummary {
                session: session.to_owned(),
                turns,
                first: first.to_rfc3339(),
                last: last.to_rfc3339(),
            })
            .collect(),
    })
}

/// The full-ledger integrity check.
pub fn verify(memory: &Memory) -> Result<VerifyResponse, ApiError> {
    let report = memory.verify().map_err(|e| facade_error(&e))?;
    Ok(VerifyResponse::from(&report))
}
