//! Dataset artifact identity: the SHA-256 of the decompressed bytes and the table of known files.
//!
//! A file is reported as official only when its digest is one of the published digests below;
//! everything else (synthetic fixtures, subsets, re-serialisations) is reported as unofficial with
//! its digest, never under an official name.

use std::{
    io::{BufReader, Read},
    path::{Path, PathBuf},
};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::DatasetError;

/// What a dataset file is: where it was read from, its digest, and whether it is an official
/// artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArtifactIdentity {
    /// The path as given.
    pub path: PathBuf,
    /// SHA-256 of the decompressed bytes, lowercase hex.
    pub sha256: String,
    /// True only for a published official artifact.
    pub official: bool,
    /// The artifact's name from the table, or `unofficial` for an unknown file.
    pub name: String,
    /// What the table says about it (empty for unknown files).
    pub note: String,
}

/// One row of the table of known artifacts.
#[derive(Copy, Clone, Debug)]
pub struct KnownArtifact {
    /// Name of the artifact.
    pub name: &'static str,
    /// SHA-256 of the decompressed file, lowercase hex.
    pub sha256: &'static str,
    /// Whether it is a published official artifact.
    pub official: bool,
    /// Provenance note.
    pub note: &'static str,
}

/// Published digests of the official benchmark files, and known unofficial derivatives (which
/// are named so that reports say what they are, and are never labelled official).
pub const KNOWN_ARTIFACTS: &[KnownArtifact] = &[
    KnownArtifact {
        name: "longmemeval_oracle.json",
        sha256: "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c",
        official: true,
        note: "official LongMemEval oracle file (500 questions, evidence sessions only)",
    },
    KnownArtifact {
        name: "longmemeval_s_cleaned.json",
        sha256: "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442",
        official: true,
        note: "official cleaned LongMemEval S file (500 questions)",
    },
    KnownArtifact {
        name: "longmemeval_m_cleaned.json",
        sha256: "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f",
        official: true,
        note: "official cleaned LongMemEval M file",
    },
    KnownArtifact {
        name: "longmemeval_s.json",
        sha256: "08d8dad4be43ee2049a22ff5674eb86725d0ce5ff434cde2627e5e8e7e117894",
        official: true,
        note: "pre-cleaning LongMemEval S file (digest from a single source, not corroborated)",
    },
    KnownArtifact {
        name: "longmemeval_s_cleaned.499of500.json",
        sha256: "48351ae4a5d965880de574a8a6ed975ecfd73a40725a42e70713842d2995595a",
        official: false,
        note: "NOT official: cleaned S in official order with record gpt4_7a0daae1 missing",
    },
    KnownArtifact {
        name: "locomo10.dev.json",
        sha256: "307e1b27f66d3a6afacf7ddc4b56c15d24c9bd9ec7f8bd9d3f655a06969f0699",
        official: false,
        note: "development part of locomo10.json (conv-26, conv-30), not the official file",
    },
];

impl ArtifactIdentity {
    /// Looks `sha256` up in [`KNOWN_ARTIFACTS`].
    pub fn recognise(path: &Path, sha256: String) -> ArtifactIdentity {
        match KNOWN_ARTIFACTS.iter().find(|a| a.sha256 == sha256) {
            Some(known) => ArtifactIdentity {
                path: path.to_owned(),
                sha256,
                official: known.official,
                name: known.name.to_owned(),
                note: known.note.to_owned(),
            },
            None => ArtifactIdentity {
                path: path.to_owned(),
                sha256,
                official: false,
                name: "unofficial".to_owned(),
                note: String::new(),
            },
        }
    }
}

/// A reader over a dataset file that decompresses gzip (recognised by its magic bytes, whatever
/// the extension) and hashes every decompressed byte as it passes, so that parsing and digesting
/// take one pass over the file. Wrap it in a `BufReader` for byte-wise consumers.
pub(crate) struct DigestingReader {
    inner: Box<dyn Read>,
    hasher: Sha256,
    path: PathBuf,
}

impl std::fmt::Debug for DigestingReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestingReader").field("path", &self.path).finish_non_exhaustive()
    }
}

impl DigestingReader {
    pub(crate) fn open(path: &Path) -> Result<DigestingReader, DatasetError> {
        let io = |source| DatasetError::Io { path: path.to_owned(), source };
        let mut file = fs_err::File::open(path).map_err(io)?;
        let mut magic = [0u8; 2];
        let n = read_up_to(&mut file, &mut magic).map_err(io)?;
        let file = fs_err::File::open(path).map_err(io)?;
        let inner: Box<dyn Read> = if n == 2 && magic == [0x1f, 0x8b] {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, file)))
        } else {
            Box::new(file)
        };
        Ok(DigestingReader { inner, hasher: Sha256::new(), path: path.to_owned() })
    }

    /// Reads whatever is left (so the digest covers the whole file) and returns the identity.
    pub(crate) fn finish(mut self) -> Result<ArtifactIdentity, DatasetError> {
        let mut sink = [0u8; 64 * 1024];
        loop {
            let n = self
                .read(&mut sink)
                .map_err(|source| DatasetError::Io { path: self.path.clone(), source })?;
            if n == 0 {
                break;
            }
        }
        let sha256 = hex(&self.hasher.finalize());
        Ok(ArtifactIdentity::recognise(&self.path, sha256))
    }
}

impl Read for DigestingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        write!(s, "{b:02x}").expect("writing to a String cannot fail");
        s
    })
}

/// SHA-256 of a file's decompressed bytes, and its identity.
pub fn identify_file(path: &Path) -> Result<ArtifactIdentity, DatasetError> {
    DigestingReader::open(path)?.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_digest_is_unofficial_and_known_unofficial_keeps_its_flag() {
        let p = Path::new("x.json");
        let unknown = ArtifactIdentity::recognise(p, "00".repeat(32));
        assert!(!unknown.official);
        assert_eq!(unknown.name, "unofficial");
        let subset = ArtifactIdentity::recognise(
            p,
            "48351ae4a5d965880de574a8a6ed975ecfd73a40725a42e70713842d2995595a".into(),
        );
        assert!(!subset.official);
        assert_eq!(subset.name, "longmemeval_s_cleaned.499of500.json");
        let oracle = ArtifactIdentity::recognise(
            p,
            "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c".into(),
        );
        assert!(oracle.official);
    }

    #[test]
    fn digest_is_over_decompressed_bytes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.json");
        fs_err::write(&plain, b"[1,2]").unwrap();
        let gz = dir.path().join("a.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"[1,2]").unwrap();
        fs_err::write(&gz, enc.finish().unwrap()).unwrap();
        let a = identify_file(&plain).unwrap();
        let b = identify_file(&gz).unwrap();
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(a.sha256, hex(&Sha256::digest(b"[1,2]")));
    }
}
