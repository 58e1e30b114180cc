//! The preregistered question split (`split.tsv`: question_id, question_type, abstention, split).

use std::{collections::BTreeMap, path::Path};

use crate::DatasetError;

/// Which part of the split a run uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitName {
    /// Tuning and calibration only.
    Dev,
    /// Reported once with a frozen configuration.
    Test,
    /// Every question.
    All,
}

impl std::str::FromStr for SplitName {
    type Err = String;
    fn from_str(s: &str) -> Result<SplitName, String> {
        match s {
            "dev" => Ok(SplitName::Dev),
            "test" => Ok(SplitName::Test),
            "all" => Ok(SplitName::All),
            other => Err(format!("split {other:?} is not dev, test or all")),
        }
    }
}

/// question id -> `dev` or `test`.
#[derive(Clone, Debug, Default)]
pub struct SplitFile {
    /// The assignment.
    pub assignment: BTreeMap<String, SplitName>,
}

impl SplitFile {
    /// Reads and checks a split file.
    pub fn read(path: &Path) -> Result<SplitFile, DatasetError> {
        let text = fs_err::read_to_string(path)
            .map_err(|source| DatasetError::Io { path: path.to_owned(), source })?;
        let bad = |line: usize, field: &str, reason: String| {
            DatasetError::invalid("split", format!("line {line}"), field, reason)
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, "question_id\tquestion_type\tabstention\tsplit")) => {}
            other => {
                return Err(bad(
                    1,
                    "header",
                    format!(
                        "expected question_id, question_type, abstention, split; found {other:?}"
                    ),
                ));
            }
        }
        let mut assignment = BTreeMap::new();
        for (i, line) in lines {
            let cols: Vec<&str> = line.split('\t').collect();
            let [id, _, _, split] = cols[..] else {
                return Err(bad(
                    i + 1,
                    "line",
                    format!("expected 4 tab-separated columns, found {}", cols.len()),
                ));
            };
            let split = match split {
                "dev" => SplitName::Dev,
                "test" => SplitName::Test,
                other => return Err(bad(i + 1, "split", format!("{other:?} is not dev or test"))),
            };
            if assignment.insert(id.to_owned(), split).is_some() {
                return Err(bad(i + 1, "question_id", format!("{id:?} is repeated")));
            }
        }
        Ok(SplitFile { assignment })
    }

    /// Whether `id` is in `split` (`All` takes everything).
    pub fn selects(&self, split: SplitName, id: &str) -> bool {
        split == SplitName::All || self.assignment.get(id) == Some(&split)
    }
}
