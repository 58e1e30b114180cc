//! Named variants of the compiled systems, declared in a run configuration: a base system
//! (`evicortex`, `evicortex-rerank`, `bm25`, `dense`) and the compile settings that differ from it.
//! They make dev exploration a committed configuration instead of a code change; the run's
//! report records each variant's settings with the rest of the configuration.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use evicortex::CompileConfig;
use evicortex::front_end::apply_compile_options;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{compiled_systems::compiled_system_config, systems::KNOWN_SYSTEMS};

/// One variant: `base`'s compile configuration with the fields in `set` replaced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemVariant {
    /// The compiled system it starts from.
    pub base: String,
    /// Compile-configuration fields that differ, as in the compiled context's `config` (objects
    /// merge field by field; anything else replaces the base's value).
    pub set: Map<String, Value>,
}

/// The compile configuration of `name`: a variant in `variants`, else a built-in compiled
/// system; `None` for systems that do not compile (controls, the comparator).
pub fn resolve(
    variants: &BTreeMap<String, SystemVariant>,
    name: &str,
    candidate_limit: usize,
) -> anyhow::Result<Option<CompileConfig>> {
    let Some(variant) = variants.get(name) else {
        return Ok(compiled_system_config(name, candidate_limit));
    };
    if KNOWN_SYSTEMS.contains(&name) {
        bail!("variant {name:?}: the name is a built-in system's; choose another");
    }
    let Some(base) = compiled_system_config(&variant.base, candidate_limit) else {
        bail!(
            "variant {name:?}: base {:?} is not a compiled system (evicortex, evicortex-rerank, bm25 or dense)",
            variant.base
        );
    };
    let config = apply_compile_options(&base, &variant.set)
        .with_context(|| format!("variant {name:?}: field `set`"))?;
    Ok(Some(config))
}

/// Gives `config` the file-wide abstention threshold of its support signal, unless the system
/// (a variant's `set`) already has one: a variant's own threshold wins, and a file without an
/// entry for the signal leaves the system as it is.
pub fn with_file_threshold(
    mut config: CompileConfig,
    thresholds: &BTreeMap<String, f32>,
) -> anyhow::Result<CompileConfig> {
    if config.abstention.threshold.is_none() {
        let signal = serde_json::to_value(config.abstention.signal)?;
        config.abstention.threshold = signal.as_str().and_then(|s| thresholds.get(s)).copied();
    }
    Ok(config)
}

/// Checks every variant resolves, so a bad one fails before any work.
pub fn check_all(
    variants: &BTreeMap<String, SystemVariant>,
    candidate_limit: usize,
) -> anyhow::Result<()> {
    for name in variants.keys() {
        resolve(variants, name, candidate_limit)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variants(json: &str) -> BTreeMap<String, SystemVariant> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_variant_changes_only_the_fields_it_sets() {
        let v = variants(
            r#"{"evicortex-k10": {"base": "evicortex", "set": {"rrf_k": 10.0, "lexical": {"top_n": 20}}}}"#,
        );
        let got = resolve(&v, "evicortex-k10", 50).unwrap().unwrap();
        let mut expected = compiled_system_config("evicortex", 50).unwrap();
        expected.rrf_k = 10.0;
        expected.lexical.top_n = 20;
        assert_eq!(got, expected);
    }

    #[test]
    fn a_tagged_setting_is_replaced_whole() {
        let v = variants(
            r#"{"x": {"base": "evicortex", "set": {"expansion": {"mode": "adjacent_turns", "radius": 1}}}}"#,
        );
        let got = resolve(&v, "x", 50).unwrap().unwrap();
        assert_eq!(
            got.expansion,
            evicortex::Expansion::AdjacentTurns { radius: 1, max_tokens: None }
        );
    }

    #[test]
    fn a_variant_keeps_its_own_abstention_threshold() {
        let v = variants(
            r#"{"abs": {"base": "evicortex", "set": {"abstention": {"signal": "max_dense_cosine", "threshold": 0.35}}}}"#,
        );
        let file_wide = BTreeMap::from([("max_dense_cosine".to_owned(), 0.5)]);
        let own = resolve(&v, "abs", 50).unwrap().unwrap();
        assert_eq!(with_file_threshold(own.clone(), &BTreeMap::new()).unwrap(), own);
        let kept = with_file_threshold(own, &file_wide).unwrap();
        assert_eq!(kept.abstention.threshold, Some(0.35));
        let base = resolve(&v, "evicortex", 50).unwrap().unwrap();
        assert_eq!(base.abstention.threshold, None);
        let given = with_file_threshold(base.clone(), &file_wide).unwrap();
        assert_eq!(given.abstention.threshold, Some(0.5));
        assert_eq!(with_file_threshold(base, &BTreeMap::new()).unwrap().abstention.threshold, None);
    }

    #[test]
    fn built_in_names_resolve_without_variants() {
        let none = BTreeMap::new();
        assert_eq!(resolve(&none, "bm25", 50).unwrap(), compiled_system_config("bm25", 50));
        assert_eq!(resolve(&none, "oracle", 50).unwrap(), None);
    }

    #[test]
    fn bad_variants_are_refused_by_name() {
        let cases = [
            (r#"{"evicortex": {"base": "bm25", "set": {}}}"#, "built-in"),
            (r#"{"v": {"base": "oracle", "set": {}}}"#, "not a compiled system"),
            (r#"{"v": {"base": "evicortex", "set": {"rrf_k": "ten"}}}"#, "field `set`"),
            (r#"{"v": {"base": "evicortex", "set": {"rrf_kk": 1.0}}}"#, "field `set`"),
            (r#"{"v": {"base": "evicortex", "set": {"rrf_k": -1.0}}}"#, "rrf_k"),
        ];
        for (json, expected) in cases {
            let v = variants(json);
            let err = check_all(&v, 50).unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains(expected), "{json}: {msg}");
            let name = v.keys().next().unwrap();
            assert!(msg.contains(&format!("{name:?}")), "{json}: {msg}");
        }
    }

    /// The frozen default states every top-level compile field, and each value is the code's
    /// default: a field added to the compile configuration later would otherwise take the code's
    /// default and change the frozen run, and a default changed in the code without the file
    /// would run something other than what was frozen.
    #[test]
    fn the_frozen_default_states_every_compile_field_at_the_code_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval/configs/default-frozen.json");
        let file: Value = serde_json::from_str(&fs_err::read_to_string(path).unwrap()).unwrap();
        let set = &file["variants"]["evicortex-frozen"]["set"];
        let default = CompileConfig::default_for(true);
        let Value::Object(full) = serde_json::to_value(&default).unwrap() else {
            panic!("a compile configuration serialises to an object")
        };
        let limit = file["candidate_limit"].as_u64().unwrap() as usize;
        let variants: BTreeMap<String, SystemVariant> =
            serde_json::from_value(file["variants"].clone()).unwrap();
        let frozen = resolve(&variants, "evicortex-frozen", limit).unwrap().unwrap();
        // Both sides serialised the same way, so that a float compares as the code holds it.
        let frozen_json = serde_json::to_value(&frozen).unwrap();
        for (field, value) in &full {
            assert!(set.get(field).is_some(), "default-frozen.json does not state `{field}`");
            assert_eq!(&frozen_json[field], value, "default-frozen.json's `{field}`");
        }
        assert_eq!(frozen, default);
    }
}
