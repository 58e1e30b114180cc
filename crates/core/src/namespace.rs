//! Validated string ids: the namespace (isolation unit) and the session id.

use serde::{Deserialize, Serialize};

/// Why a string was refused as a namespace or session id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The id is the empty string.
    #[error("{kind} is empty")]
    Empty {
        /// Which id: "namespace" or "session".
        kind: &'static str,
    },
    /// The id is longer than allowed.
    #[error("{kind} is {len} bytes long, the limit is {max}")]
    TooLong {
        /// Which id.
        kind: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The id holds a character that is not allowed.
    #[error("{kind} contains {ch:?}, allowed are {allowed}")]
    BadChar {
        /// Which id.
        kind: &'static str,
        /// The offending character.
        ch: char,
        /// A description of the allowed characters.
        allowed: &'static str,
    },
}

/// The isolation unit: a user, a tenant or a benchmark question. No read, index or query ever
/// crosses namespaces.
///
/// Namespaces appear in URL paths and file names, so they are restricted to ASCII letters, digits
/// and `. _ - : @`, at most 128 bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Namespace(String);

const NAMESPACE_MAX: usize = 128;
const NAMESPACE_ALLOWED: &str = "ASCII letters, digits and . _ - : @";

impl Namespace {
    /// Checks and wraps a namespace.
    pub fn new(raw: &str) -> Result<Namespace, IdError> {
        let kind = "namespace";
        if raw.is_empty() {
            return Err(IdError::Empty { kind });
        }
        if raw.len() > NAMESPACE_MAX {
            return Err(IdError::TooLong { kind, len: raw.len(), max: NAMESPACE_MAX });
        }
        if let Some(ch) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@')))
        {
            return Err(IdError::BadChar { kind, ch, allowed: NAMESPACE_ALLOWED });
        }
        Ok(Namespace(raw.to_owned()))
    }
    /// The namespace as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Namespace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Namespace::new(&raw).map_err(serde::de::Error::custom)
    }
}

/// A conversation session inside a namespace, as named by the source. Any non-empty text of at most
/// 256 bytes without control characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

const SESSION_MAX: usize = 256;

impl SessionId {
    /// Checks and wraps a session id.
    pub fn new(raw: &str) -> Result<SessionId, IdError> {
        let kind = "session";
        if raw.is_empty() {
            return Err(IdError::Empty { kind });
        }
        if raw.len() > SESSION_MAX {
            return Err(IdError::TooLong { kind, len: raw.len(), max: SESSION_MAX });
        }
        if let Some(ch) = raw.chars().find(|c| c.is_control()) {
            return Err(IdError::BadChar {
                kind,
                ch,
                allowed: "any character but control characters",
            });
        }
        Ok(SessionId(raw.to_owned()))
    }
    /// The session id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        SessionId::new(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_accepts_benchmark_question_ids() {
        for ok in ["alice", "gpt4_7a0daae1", "e47becba_abs", "conv-26", "tenant:42@eu"] {
            assert_eq!(Namespace::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn namespace_refuses_path_characters_and_empty() {
        assert_eq!(Namespace::new(""), Err(IdError::Empty { kind: "namespace" }));
        assert!(matches!(Namespace::new("a/b"), Err(IdError::BadChar { ch: '/', .. })));
        assert!(matches!(Namespace::new(&"x".repeat(129)), Err(IdError::TooLong { len: 129, .. })));
    }

    #[test]
    fn session_refuses_control_characters() {
        assert!(SessionId::new("answer_4be1b6b4_2").is_ok());
        assert!(SessionId::new("sess ion ü").is_ok());
        assert!(matches!(SessionId::new("a\nb"), Err(IdError::BadChar { ch: '\n', .. })));
    }
}
