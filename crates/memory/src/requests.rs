//! The request-level operations every door offers over a [`Memory`] (the HTTP API, MCP, Python;
//! the CLI where it prints JSON): the turns of an append request checked field by field, the
//! erasure target a request names, and the responses of append, erase, verify and namespace
//! statistics, in the one shape every door renders (the HTTP API documents them under these
//! names with the feature `openapi`).

use std::collections::BTreeSet;

use evicortex_core::{Namespace, SessionId, Turn, TurnId};
use evicortex_ledger::{AppendReceipt, AppendStatus, EraseReceipt, EraseTarget, LedgerPosition};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{FieldError, IngestOptions, Memory, ReadError, VerifyReport, jsonl::turn_from_json};

/// Where the turns of a request get their namespace.
#[derive(Clone, Debug)]
pub enum TurnsNamespace {
    /// From the request's path (or an MCP server's command line): a turn may not name one.
    Fixed(Namespace),
    /// From each turn's `namespace` field, else this default (none: the field is required).
    Default(Option<Namespace>),
}

/// Checks the turn objects of an append request (at least one, at most `max_turns`) with the
/// JSONL validator; the error names the field as `turns[2].time`.
pub fn turns_from_objects(
    objects: &[Map<String, Value>],
    namespace: &TurnsNamespace,
    max_turns: usize,
) -> Result<Vec<Turn>, FieldError> {
    let refuse = |field: String, reason: String| FieldError { field, reason };
    if objects.is_empty() {
        return Err(refuse("turns".to_owned(), "is empty: send at least one turn".to_owned()));
    }
    if objects.len() > max_turns {
        let reason = format!("has {} turns, the limit per request is {max_turns}", objects.len());
        return Err(refuse("turns".to_owned(), reason));
    }
    let (default_namespace, fixed) = match namespace {
        TurnsNamespace::Fixed(namespace) => (Some(namespace.clone()), true),
        TurnsNamespace::Default(namespace) => (namespace.clone(), false),
    };
    let options = IngestOptions { default_namespace, ..IngestOptions::default() };
    objects
        .iter()
        .enumerate()
        .map(|(i, object)| {
            if fixed && object.contains_key("namespace") {
                let reason = "is not allowed here: the namespace is given by the path".to_owned();
                return Err(refuse(format!("turns[{i}].namespace"), reason));
            }
            turn_from_json(object, &options).map_err(|e| FieldError {
                field: format!("turns[{i}].{}", e.field),
                reason: e.reason,
            })
        })
        .collect()
}

/// The one target of an erase request inside `namespace`: a session, a record, or (`all`, which
/// must be `true` when given) the whole namespace. Giving none or several blames `request`, the
/// door's name for the request as a whole (`body` over HTTP).
pub fn erase_target(
    namespace: &Namespace,
    session: Option<SessionId>,
    record: Option<TurnId>,
    all: Option<bool>,
    request: &str,
) -> Result<EraseTarget, FieldError> {
    let namespace = namespace.clone();
    match (session, record, all) {
        (Some(session), None, None) => Ok(EraseTarget::Session(namespace, session)),
        (None, Some(record), None) => Ok(EraseTarget::Record(namespace, record)),
        (None, None, Some(true)) => Ok(EraseTarget::Namespace(namespace)),
        (None, None, Some(false)) => Err(FieldError {
            field: "all".to_owned(),
            reason: "must be true when given".to_owned(),
        }),
        _ => Err(FieldError {
            field: request.to_owned(),
            reason: "give exactly one of session, record or all".to_owned(),
        }),
    }
}

/// Response of `POST /v1/namespaces/{ns}/turns`: one entry per input turn, in input order.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AppendResponse {
    /// Turns newly stored by this request.
    pub appended: usize,
    /// Turns that were already stored identically (idempotent retry); nothing changed for them.
    pub already_present: usize,
    /// Per input turn: its ledger record and digest.
    pub turns: Vec<AppendedTurn>,
}

/// Where one appended turn is stored.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AppendedTurn {
    /// The record's number in the namespace (its id in citations, erasure and export).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub id: TurnId,
    /// BLAKE3 digest of the record (hex).
    pub digest: String,
    /// `appended` or `already_present`.
    pub status: String,
}

impl From<&AppendReceipt> for AppendResponse {
    fn from(receipt: &AppendReceipt) -> AppendResponse {
        let turns = receipt
            .outcomes
            .iter()
            .map(|o| AppendedTurn {
                id: o.id,
                digest: o.digest.to_hex(),
                status: match o.status {
                    AppendStatus::Appended => "appended",
                    AppendStatus::AlreadyPresent => "already_present",
                }
                .to_owned(),
            })
            .collect();
        AppendResponse {
            appended: receipt.appended(),
            already_present: receipt.already_present(),
            turns,
        }
    }
}

/// Response of `POST /v1/namespaces/{ns}/erase`.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EraseResponse {
    /// The redaction record appended, if any turn was erased now.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub redaction: Option<TurnId>,
    /// Record ids erased by this request.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<u64>))]
    pub erased: Vec<TurnId>,
    /// Matching turns an earlier erasure had already erased.
    pub already_erased: usize,
}

impl From<&EraseReceipt> for EraseResponse {
    fn from(receipt: &EraseReceipt) -> EraseResponse {
        EraseResponse {
            redaction: receipt.redaction,
            erased: receipt.erased.iter().map(|t| t.id).collect(),
            already_erased: receipt.already_erased,
        }
    }
}

/// Response of `GET /v1/verify`: the full-ledger integrity check.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerifyResponse {
    /// Always `true` in a 200 response; a failed check is a 500 naming the first bad record.
    pub ok: bool,
    /// Records checked.
    pub records: u64,
    /// Live turns.
    pub turns: u64,
    /// Erased turns.
    pub erased_turns: u64,
    /// Redaction records.
    pub redactions: u64,
    /// The last record's ledger position (across every namespace: admin keys only).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub head: Option<LedgerPosition>,
    /// Chain hash of the last record (hex).
    pub chain_head: String,
}

impl From<&VerifyReport> for VerifyResponse {
    fn from(report: &VerifyReport) -> VerifyResponse {
        VerifyResponse {
            ok: true,
            records: report.records,
            turns: report.turns,
            erased_turns: report.erased_turns,
            redactions: report.redactions,
            head: report.head,
            chain_head: report.chain_head.to_hex(),
        }
    }
}

/// Response of `GET /v1/namespaces/{ns}/stats`: counts of this namespace only.
#[derive(Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamespaceStatsResponse {
    /// The namespace.
    pub namespace: String,
    /// Live (unerased) turns.
    pub turns: u64,
    /// Sessions with at least one live turn.
    pub sessions: u64,
    /// Bytes of live turn text.
    pub text_bytes: u64,
}

impl Memory {
    /// Counts of `namespace`'s live turns alone: turns, sessions, bytes of text.
    pub fn namespace_stats(
        &self,
        namespace: &Namespace,
    ) -> Result<NamespaceStatsResponse, ReadError> {
        let evidence = self.evidence(namespace)?;
        let sessions: BTreeSet<_> = evidence.iter().map(|e| &e.turn.session).collect();
        Ok(NamespaceStatsResponse {
            namespace: namespace.to_string(),
            turns: evidence.len() as u64,
            sessions: sessions.len() as u64,
            text_bytes: evidence.iter().map(|e| e.turn.text.len() as u64).sum(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(json: Value) -> Vec<Map<String, Value>> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn turns_get_the_fixed_namespace_and_name_the_bad_field_by_index() {
        let alice = Namespace::new("alice").unwrap();
        let good = serde_json::json!({"session": "s", "turn": 0, "role": "user", "text": "hi",
            "time": "2024-05-02T10:00:00Z"});
        let mut named = good.clone();
        named["namespace"] = "bob".into();
        let mut bad = good.clone();
        bad["time"] = "yesterday".into();
        let fixed = TurnsNamespace::Fixed(alice.clone());
        let turns = turns_from_objects(&objects(Value::Array(vec![good.clone()])), &fixed, 10);
        assert_eq!(turns.unwrap()[0].namespace, alice);
        let err = turns_from_objects(
            &objects(Value::Array(vec![good.clone(), named.clone()])),
            &fixed,
            10,
        )
        .unwrap_err();
        assert_eq!(err.field, "turns[1].namespace");
        let unset = TurnsNamespace::Default(None);
        let turns = turns_from_objects(&objects(Value::Array(vec![named])), &unset, 10).unwrap();
        assert_eq!(turns[0].namespace.as_str(), "bob");
        let default = TurnsNamespace::Default(Some(alice));
        let err = turns_from_objects(&objects(Value::Array(vec![good, bad])), &default, 10);
        assert_eq!(err.unwrap_err().field, "turns[1].time");
        let err = turns_from_objects(&[], &default, 10).unwrap_err();
        assert_eq!(err.field, "turns");
    }

    #[test]
    fn an_erase_request_names_exactly_one_target() {
        let ns = Namespace::new("alice").unwrap();
        let record = Some(TurnId::from_raw(3));
        let target = erase_target(&ns, None, record, None, "body").unwrap();
        assert_eq!(target, EraseTarget::Record(ns.clone(), TurnId::from_raw(3)));
        assert_eq!(erase_target(&ns, None, None, Some(false), "body").unwrap_err().field, "all");
        let several = erase_target(&ns, None, record, Some(true), "target").unwrap_err();
        assert_eq!(several.field, "target");
        assert!(erase_target(&ns, None, None, None, "body").is_err());
    }
}
