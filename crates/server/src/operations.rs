//! The operations both front ends (HTTP and MCP) offer, on validated input: append, erase,
//! namespace statistics, verify. Synchronous: callers run them on a blocking thread.

use evicortex::front_end::turn_from_json;
use evicortex::{EventTime, IngestOptions, Memory, Namespace, Turn};
use serde_json::{Map, Value};

use crate::dto::{
    AppendRequest, AppendResponse, AppendedTurn, CompileRequest, EraseRequest, EraseResponse,
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
    if request.turns.is_empty() {
        return Err(ApiError::invalid("turns", "is empty: send at least one turn"));
    }
    if request.turns.len() > max_turns {
        return Err(ApiError::invalid(
            "turns",
            format!("has {} turns, the limit per request is {max_turns}", request.turns.len()),
        ));
    }
    let turns = validate_turns(namespace, &request.turns)?;
    let receipt = memory.append(&turns).map_err(|e| facade_error(&e))?;
    let turns = receipt
        .outcomes
        .iter()
        .map(|o| AppendedTurn {
            id: o.id,
            digest: o.digest.to_hex(),
            status: match o.status {
                evicortex::AppendStatus::Appended => "appended",
                evicortex::AppendStatus::AlreadyPresent => "already_present",
            }
            .to_owned(),
        })
        .collect();
    Ok(AppendResponse {
        appended: receipt.appended(),
        already_present: receipt.already_present(),
        turns,
    })
}

/// Checks every turn object with the JSONL validator, in `namespace`. A `namespace` field is
/// refused: the namespace comes from the path (or the MCP server's command line) alone.
fn validate_turns(
    namespace: &Namespace,
    objects: &[Map<String, Value>],
) -> Result<Vec<Turn>, ApiError> {
    let options =
        IngestOptions { default_namespace: Some(namespace.clone()), ..IngestOptions::default() };
    objects
        .iter()
        .enumerate()
        .map(|(i, object)| {
            if object.contains_key("namespace") {
                return Err(ApiError::invalid(
                    format!("turns[{i}].namespace"),
                    "is not allowed here: the namespace is given by the path",
                ));
            }
            turn_from_json(object, &options)
                .map_err(|e| ApiError::invalid(format!("turns[{i}].{}", e.field), e.reason))
        })
        .collect()
}

/// Erases the one target `request` names inside `namespace`.
pub fn erase(
    memory: &Memory,
    namespace: &Namespace,
    request: EraseRequest,
) -> Result<EraseResponse, ApiError> {
    let namespace = namespace.clone();
    let target = match (request.session, request.record, request.all) {
        (Some(session), None, None) => evicortex::EraseTarget::Session(namespace, session),
        (None, Some(record), None) => evicortex::EraseTarget::Record(namespace, record),
        (None, None, Some(true)) => evicortex::EraseTarget::Namespace(namespace),
        (None, None, Some(false)) => {
            return Err(ApiError::invalid("all", "must be true when given"));
        }
        _ => return Err(ApiError::invalid("body", "give exactly one of session, record or all")),
    };
    let receipt = memory.erase(&target).map_err(|e| facade_error(&e))?;
    Ok(EraseResponse {
        redaction: receipt.redaction,
        erased: receipt.erased.iter().map(|t| t.id).collect(),
        already_erased: receipt.already_erased,
    })
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
    let evidence = memory.evidence(namespace).map_err(|e| facade_error(&e))?;
    let sessions: std::collections::BTreeSet<_> =
        evidence.iter().map(|e| &e.turn.session).collect();
    Ok(NamespaceStatsResponse {
        namespace: namespace.to_string(),
        turns: evidence.len() as u64,
        sessions: sessions.len() as u64,
        text_bytes: evidence.iter().map(|e| e.turn.text.len() as u64).sum(),
    })
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
    Ok(VerifyResponse {
        ok: true,
        records: report.records,
        turns: report.turns,
        erased_turns: report.erased_turns,
        redactions: report.redactions,
        head: report.head,
        chain_head: report.chain_head.to_hex(),
    })
}
