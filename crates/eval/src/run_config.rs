//! Committed evaluation configurations (preregistration): a JSON file fixes every setting of a
//! run; command-line flags may override single settings, and the report records both the file's
//! digest and every override.

use std::path::{Path, PathBuf};

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
    /// Support threshold below which the compiled systems abstain, frozen from a dev run's
    /// calibration; absent means they never abstain (support is still reported).
    #[serde(default)]
    pub abstention_threshold: Option<f32>,
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
            abstention_threshold: self.abstention_threshold,
            config_file: Some((
                PathBuf::from(config_path),
                crate::runner::config_digest(config_path)?,
            )),
        })
    }
}
