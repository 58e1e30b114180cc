//! Partial compile configurations: the fields a caller sets (an HTTP or MCP request's `options`,
//! an evaluation variant), applied over a complete base configuration.
//!
//! Objects merge field by field; a tagged setting (one with a `mode`, such as `dense` or
//! `expansion`) and any other value replaces the base's whole. A field the configuration does
//! not have is refused by its path, never silently ignored. Turning a retriever off also turns
//! off what needs it unless the options set it: its context list, and for dense retrieval the
//! dense abstention signal (lexical coverage instead, as `evicortex compile --dense off`).

use std::collections::BTreeSet;

use evicortex_compiler::{CompileConfig, DenseConfig, SupportSignal};
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
    /// A value of the wrong shape, by its dotted path (`lexical.top_n`).
    #[error("{field}: {message}")]
    Shape {
        /// The value's path.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The configuration could not be rendered as JSON.
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
            CompileOptionsError::Shape { field, .. } => Some(field.clone()),
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
    let mut config: CompileConfig =
        serde_path_to_error::deserialize(merged.clone()).map_err(|e| {
            CompileOptionsError::Shape {
                field: e.path().to_string(),
                message: e.into_inner().to_string(),
            }
        })?;
    // Turning a retriever off turns its context list off too, unless the options say otherwise.
    let sets = |section: &str, name: &str| {
        set.get(section).and_then(Value::as_object).is_some_and(|c| c.contains_key(name))
    };
    if config.dense == DenseConfig::Off && !sets("context", "dense_radius") {
        config.context.dense_radius = 0;
    }
    if config.lexical.top_n == 0 && !sets("context", "lexical_radius") {
        config.context.lexical_radius = 0;
    }
    // Turning dense retrieval off makes abstention use the lexical signal, as `evicortex compile
    // --dense off` does, unless the options name a signal. Not when the base carries a threshold
    // the options leave alone: it was chosen for the dense cosine and means nothing for lexical
    // coverage, so the combination is refused below, naming `abstention.signal`.
    let base_threshold_kept =
        base.abstention.threshold.is_some() && !sets("abstention", "threshold");
    if config.dense == DenseConfig::Off
        && config.abstention.signal == SupportSignal::MaxDenseCosine
        && !sets("abstention", "signal")
        && !base_threshold_kept
    {
        config.abstention.signal = SupportSignal::LexicalCoverage;
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
    use evicortex_compiler::Expansion;

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
        assert_eq!(err.field().as_deref(), Some("rrf_k"), "{err}");
        let err = apply(r#"{"lexical": {"top_n": "ten"}}"#).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("lexical.top_n"), "{err}");
        let err = apply(r#"{"rrf_k": -1.0}"#).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("rrf_k"), "{err}");
    }

    #[test]
    fn dense_off_selects_the_lexical_signal_as_the_cli_does_unless_told_otherwise() {
        let got = apply(r#"{"dense": {"mode": "off"}}"#).unwrap();
        let cli = CompileConfig::hybrid(50, DenseConfig::Off);
        assert_eq!(got, cli, "the configuration of `--dense off`");
        let err =
            apply(r#"{"dense": {"mode": "off"}, "abstention": {"signal": "max_dense_cosine"}}"#)
                .unwrap_err();
        assert_eq!(err.field().as_deref(), Some("abstention.signal"), "{err}");

        let mut with_threshold = CompileConfig::hybrid(50, DenseConfig::On { top_n: 50 });
        with_threshold.abstention.threshold = Some(0.3);
        let off = |json: &str| {
            apply_compile_options(&with_threshold, &serde_json::from_str(json).unwrap())
        };
        let err = off(r#"{"dense": {"mode": "off"}}"#).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("abstention.signal"), "a cosine threshold: {err}");
        let got = off(r#"{"dense": {"mode": "off"}, "abstention": {"threshold": 0.5}}"#).unwrap();
        assert_eq!(got.abstention.signal, SupportSignal::LexicalCoverage);
        assert_eq!(got.abstention.threshold, Some(0.5));
    }
}
