//! Committed evaluation configurations (preregistration): a JSON file fixes every setting of a
//! run; command-line flags may override single settings, and the report records both the file's
//! digest and every override.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::{
    runner::{Benchmark, RunSpec},
    split::SplitName,
};

/// The file format of `eval/configs/*.json`. Dataset and split paths are relative to the data
/// directory (`EVICORTEX_DATA_DIR`, else `../shared/data`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfigFile {
    /// `longmemeval` or `locomo`.
    pub benchmark: String,
    /// Dataset path, relative to the data directory.
    pub dataset: String,
    /// `dev`, `test` or `all`.
    pub split: String,
    /// Split file, relative to the data directory.
    #[serde(default)]
    pub split_file: Option<String>,
    /// Systems.
    pub systems: Vec<String>,
    /// Budgets: numbers, or `"none"`.
    pub budgets: Vec<serde_json::Value>,
    /// Reader tokenizer.
    pub reader_tokenizer: String,
    /// Metric cutoffs.
    pub cutoffs: Vec<usize>,
    /// Candidate limit per retriever.
    pub candidate_limit: usize,
    /// Only the first N questions of each type (a stratified subset).
    #[serde(default)]
    pub max_per_type: Option<usize>,
    /// Support thresholds below which compiled systems abstain, keyed by the support signal
    /// they apply to (`max_dense_cosine`, `lexical_coverage`: the scales differ), frozen from a
    /// dev run's calibration. A system whose signal has no entry never abstains (its support is
    /// still reported).
    #[serde(default)]
    pub abstention_thresholds: BTreeMap<String, f32>,
    /// Named variants of the compiled systems (a base system and the compile settings that
    /// differ), usable in `systems`.
    #[serde(default)]
    pub variants: BTreeMap<String, crate::variants::SystemVariant>,
    /// The catalogue encoder of dense retrieval and the comparator (`evicortex model list`);
    /// default all-minilm-l6-v2.
    #[serde(default)]
    pub encoder: Option<String>,
    /// Further catalogue encoders whose dense lists compiled systems fuse beside `encoder`'s
    /// (as a store whose `evicortex encoders` names them all); the comparator keeps `encoder`.
    #[serde(default)]
    pub also_encoders: Vec<String>,
    /// The reranker of systems that rerank (`mpnet-cosine`, `cosine:MODEL`,
    /// `cross-encoder:DIR@SHA256`); a run with such a system and no reranker is refused.
    #[serde(default)]
    pub reranker: Option<String>,
    /// Free text: why these settings (kept in the report).
    #[serde(default)]
    pub rationale: String,
}

/// Parses a budget: a positive integer or `none`.
pub fn parse_budget(raw: &str) -> anyhow::Result<Option<usize>> {
    match raw.trim() {
        "none" => Ok(None),
        n => match n.parse::<usize>() {
            Ok(0) | Err(_) => bail!("budget {raw:?} is not a positive integer or `none`"),
            Ok(v) => Ok(Some(v)),
        },
    }
}

/// Checks that `name` is a catalogue encoder.
pub fn check_encoder(name: &str) -> anyhow::Result<String> {
    evicortex::check_catalogue_encoder(name).map_err(|e| anyhow::anyhow!("encoder: {e}"))?;
    Ok(name.to_owned())
}

/// Checks that `raw` names a reranker ([`evicortex::RerankerSpec`]).
pub fn check_reranker(raw: &str) -> anyhow::Result<String> {
    raw.parse::<evicortex::RerankerSpec>().map_err(|e| anyhow::anyhow!("reranker: {e}"))?;
    Ok(raw.to_owned())
}

/// Checks one abstention threshold: `signal` must name one of the compiler's support signals
/// (its snake_case name, as `SupportSignal` serialises), and `value` must be finite.
pub fn check_abstention_threshold(signal: &str, value: f32) -> anyhow::Result<()> {
    serde_json::from_value::<evicortex::SupportSignal>(serde_json::Value::from(signal)).map_err(
        |_| {
            anyhow::anyhow!(
                "{signal:?} is not a support signal (max_dense_cosine or lexical_coverage)"
            )
        },
    )?;
    if !value.is_finite() {
        bail!("the threshold of {signal} must be finite, got {value}");
    }
    Ok(())
}

impl RunConfigFile {
    /// Reads a configuration file.
    pub fn read(path: &Path) -> anyhow::Result<RunConfigFile> {
        let text = fs_err::read_to_string(path)?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// The run it describes, paths resolved against `data_dir`.
    pub fn to_spec(&self, data_dir: &Path, config_path: &Path) -> anyhow::Result<RunSpec> {
        let benchmark = match self.benchmark.as_str() {
            "longmemeval" => Benchmark::LongMemEval,
            "locomo" => Benchmark::Locomo,
            other => bail!("benchmark {other:?} is not longmemeval or locomo"),
        };
        let split: SplitName = self.split.parse().map_err(anyhow::Error::msg)?;
        let budgets = self
            .budgets
            .iter()
            .map(|b| match b {
                serde_json::Value::Number(n) => parse_budget(&n.to_string()),
                serde_json::Value::String(s) => parse_budget(s),
                other => bail!("budget {other} is not a number or \"none\""),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if budgets.is_empty() {
            bail!("budgets is empty");
        }
        for (signal, &t) in &self.abstention_thresholds {
            check_abstention_threshold(signal, t).context("abstention_thresholds")?;
        }
        crate::variants::check_all(&self.variants, self.candidate_limit).context("variants")?;
        Ok(RunSpec {
            benchmark,
            dataset: data_dir.join(&self.dataset),
            split,
            split_file: self.split_file.as_ref().map(|s| data_dir.join(s)),
            systems: self.systems.clone(),
            budgets,
            reader_tokenizer: self.reader_tokenizer.clone(),
            cutoffs: self.cutoffs.clone(),
            candidate_limit: self.candidate_limit,
            max_questions: None,
            max_per_type: self.max_per_type,
            abstention_thresholds: self.abstention_thresholds.clone(),
            variants: self.variants.clone(),
            encoder: match &self.encoder {
                Some(name) => check_encoder(name)?,
                None => evicortex::DEFAULT_MODEL.to_owned(),
            },
            also_encoders: self
                .also_encoders
                .iter()
                .map(|name| check_encoder(name))
                .collect::<anyhow::Result<_>>()?,
            reranker: self.reranker.as_deref().map(check_reranker).transpose()?,
            config_file: Some((
                PathBuf::from(config_path),
                crate::runner::config_digest(config_path)?,
            )),
            stratified: None,
            reader: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../eval/configs")
    }

    /// Every committed configuration parses into a run, and the frozen test configuration
    /// carries one threshold per support signal.
    #[test]
    fn committed_configurations_parse_and_the_frozen_one_has_thresholds() {
        let mut n = 0;
        for entry in fs_err::read_dir(configs_dir()).unwrap() {
            let path = entry.unwrap().path();
            let spec = RunConfigFile::read(&path)
                .and_then(|f| f.to_spec(Path::new("data"), &path))
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            if path.file_name().is_some_and(|f| f == "longmemeval-s-test-frozen.json") {
                assert_eq!(spec.split, SplitName::Test);
                assert_eq!(spec.abstention_thresholds.len(), 2, "{:?}", spec.abstention_thresholds);
            }
            n += 1;
        }
        assert!(n >= 2, "found {n} configurations");
    }

    #[test]
    fn an_unknown_support_signal_is_refused_by_name() {
        let text = r#"{"benchmark": "locomo", "dataset": "d.json", "split": "all",
            "systems": ["bm25"], "budgets": [512], "reader_tokenizer": "o200k_base",
            "cutoffs": [10], "candidate_limit": 50, "abstention_thresholds": {"cosine": 0.5}}"#;
        let file: RunConfigFile = serde_json::from_str(text).unwrap();
        let err = file.to_spec(Path::new("data"), Path::new("eval/configs/x.json")).unwrap_err();
        assert!(format!("{err:#}").contains("\"cosine\""), "{err:#}");
    }
}
