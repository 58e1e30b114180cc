//! Compile options as they come from outside (an HTTP or MCP request's `options`, the CLI's
//! `--options`) through to the validated configuration, over the base each door applies them
//! to: the memory's own default (`Memory::config_with_options`, a store without an encoder, as
//! the servers call it), the default with dense retrieval on, the CLI's `--dense off` default
//! and the hybrid baseline. The first byte picks the base; the rest is the options' JSON.
//! Properties: no panic; a refusal names the offending field by a path that starts with a key
//! the options set, or a setting of the configuration they conflict with (the servers answer
//! 422 with `options.<path>`); an accepted configuration
//! validates, round-trips through its JSON form and applies again unchanged.

use evicortex::front_end::apply_compile_options;
use evicortex::{CompileConfig, CompileOptionsError, DEFAULT_TOP_N, DenseConfig};
use serde_json::{Map, Value};

use crate::http_bodies::store;

/// The dotted paths of a configuration's fields.
fn paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    if let Value::Object(map) = value {
        for (key, inner) in map {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            paths(inner, &path, out);
            out.push(path);
        }
    }
}

/// A refusal names a field the options set, or one of the configuration's own (a base's
/// setting the options conflict with).
fn check_refusal(base: &CompileConfig, options: &Map<String, Value>, err: &CompileOptionsError) {
    let field = err.field().unwrap_or_else(|| panic!("a refusal that names no field: {err}"));
    // A key may itself hold a dot: the path starts with one of the keys the options set.
    let set = options.keys().any(|key| {
        field == *key || field.strip_prefix(key.as_str()).is_some_and(|r| r.starts_with(['.', '[']))
    });
    let mut known = Vec::new();
    paths(&serde_json::to_value(base).unwrap(), "", &mut known);
    assert!(
        set || known.contains(&field),
        "a refusal names {field:?}, neither set by the options nor a setting: {err}"
    );
    assert!(!err.to_string().is_empty());
}

fn check_accepted(base: &CompileConfig, config: &CompileConfig) {
    config.validate().unwrap_or_else(|e| panic!("an accepted configuration is invalid: {e}"));
    let recorded = serde_json::to_value(config).expect("a configuration renders as JSON");
    let parsed: CompileConfig = serde_json::from_value(recorded.clone())
        .unwrap_or_else(|e| panic!("a configuration does not parse from its JSON: {e}"));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), recorded, "changed through its JSON");
    let Value::Object(recorded) = recorded else { panic!("a configuration renders as an object") };
    let again = apply_compile_options(base, &recorded)
        .unwrap_or_else(|e| panic!("a recorded configuration is refused: {e}"));
    assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(config).unwrap());
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    let Ok(Value::Object(options)) = serde_json::from_slice(body) else { return };
    let (base, result) = match which % 4 {
        0 => {
            let memory = &store().memory;
            (memory.default_config(), memory.config_with_options(&options))
        }
        1 => {
            let base = CompileConfig::default_for(true);
            let result = apply_compile_options(&base, &options);
            (base, result)
        }
        2 => {
            let base = CompileConfig::default_with(DEFAULT_TOP_N, DenseConfig::Off);
            let result = apply_compile_options(&base, &options);
            (base, result)
        }
        _ => {
            let base = CompileConfig::hybrid(DEFAULT_TOP_N, DenseConfig::Off);
            let result = apply_compile_options(&base, &options);
            (base, result)
        }
    };
    match result {
        Ok(config) => check_accepted(&base, &config),
        Err(err) => check_refusal(&base, &options, &err),
    }
}
