//! Partial compile configurations: the fields a caller sets (an HTTP or MCP request's `options`,
//! an evaluation variant), applied over a complete base configuration.
//!
//! Objects merge field by field; a tagged setting (one with a `mode`, such as `dense` or
//! `expansion`) and any other value replaces the base's whole. A field the configuration does
//! not have is refused by its path, never silently ignored.

use std::collections::BTreeSet;

use evicortex_compiler::CompileConfig;
use serde_json::{Map, Value};

use crate::ErrorClass;

/// Why [`apply_compile_options`] refused the options.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileOptionsError {
    /// Fields a compile configuration does not have.
    #[error("unknown settings {}: a compile configuration has no such field", paths.join(", "))]
    Unknown {
        /// Their dotted paths (`lexical.top_k`).
        paths: Vec<String>,
    },
    /// A value of the wrong shape.
    #[error("{0}")]
    Invalid(String),
    /// A value out of range, or an impossible combination.
    #[error(transparent)]
    Config(#[from] evicortex_compiler::CompileError),
}

impl CompileOptionsError {
    /// Always bad input.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::BadInput
    }

    /// The dotted path of the first offending field, when one is known.
    pub fn field(&self) -> Option<String> {
        match self {
            CompileOptionsError::Unknown { paths } => paths.first().cloned(),
            CompileOptionsError::Config(evicortex_compiler::CompileError::InvalidConfig {
                field,
                ..
            }) => Some((*field).to_owned()),
            _ => None,
        }
    }
}

/// `base` with the fields in `set` replaced, checked: unknown fields, wrong shapes and invalid
/// values are refused.
pub fn apply_compile_options(
    base: &CompileConfig,
    set: &Map<String, Value>,
) -> Result<CompileConfig, CompileOptionsError> {
    let mut merged = serde_json::to_value(base)
        .map_err(|e| CompileOptionsError::Invalid(format!("the base configuration: {e}")))?;
    merge(&mut merged, set);
    let mut config: CompileConfig = serde_json::from_value(merged.clone())
        .map_err(|e| CompileOptionsError::Invalid(e.to_string()))?;
    // Turning a retriever off turns its context list off too, unless the options say otherwise.
    let sets_radius = |name: &str| {
        set.get("context").and_then(Value::as_object).is_some_and(|c| c.contains_key(name))
    };
    if config.dense == evicortex_compiler::DenseConfig::Off && !sets_radius("dense_radius") {
        config.context.dense_radius = 0;
    }
    if config.lexical.top_n == 0 && !sets_radius("lexical_radius") {
        config.context.lexical_radius = 0;
    }
    // Serde ignores fields a configuration does not have; a misspelt setting must not vanish.
    let mut given = BTreeSet::new();
    key_paths(&merged, "", &mut given);
    let mut known = BTreeSet::new();
    let normalised = serde_json::to_value(&config)
        .map_err(|e| CompileOptionsError::Invalid(format!("the configuration: {e}")))?;
    key_paths(&normalised, "", &mut known);
    let unknown: Vec<String> = given.difference(&known).cloned().collect();
    if !unknown.is_empty() {
        return Err(CompileOptionsError::Unknown { paths: unknown });
    }
    config.validate()?;
    Ok(config)
}

fn key_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Value::Object(map) = value {
        for (key, inner) in map {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            key_paths(inner, &path, out);
            out.insert(path);
        }
    }
}

fn merge(target: &mut Value, set: &Map<String, Value>) {
    let Value::Object(target) = target else {
        *target = Value::Object(set.clone());
        return;
    };
    for (key, value) in set {
        match (target.get_mut(key), value) {
            (Some(existing @ Value::Object(_)), Value::Object(inner))
                if !inner.contains_key("mode") =>
            {
                merge(existing, inner)
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use evicortex_compiler::{DenseConfig, Expansion};

    use super::*;

    fn apply(json: &str) -> Result<CompileConfig, CompileOptionsError> {
        let base = CompileConfig::hybrid(50, DenseConfig::On { top_n: 50 });
        apply_compile_options(&base, &serde_json::from_str(json).unwrap())
    }

    #[test]
    fn only_the_fields_given_change() {
        let got = apply(r#"{"rrf_k": 5.0, "lexical": {"top_n": 20}}"#).unwrap();
        let mut expected = CompileConfig::hybrid(50, DenseConfig::On { top_n: 50 });
        expected.rrf_k = 5.0;
        expected.lexical.top_n = 20;
        assert_eq!(got, expected);
        let got = apply(r#"{"expansion": {"mode": "adjacent_turns", "radius": 1}}"#).unwrap();
        assert_eq!(got.expansion, Expansion::AdjacentTurns { radius: 1, max_tokens: None });
    }

    #[test]
    fn unknown_wrong_and_invalid_fields_are_refused_by_path() {
        let err = apply(r#"{"bogus": 1, "lexical": {"top_k": 3}}"#).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("bogus"), "{err}");
        assert!(err.to_string().contains("lexical.top_k"), "{err}");
        let err = apply(r#"{"rrf_k": "ten"}"#).unwrap_err();
        assert!(matches!(err, CompileOptionsError::Invalid(_)), "{err}");
        let err = apply(r#"{"rrf_k": -1.0}"#).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("rrf_k"), "{err}");
    }
}
