//! The hash chain: each record's chain hash commits to every record before it.

use evicortex_core::EvidenceDigest;

/// `BLAKE3(previous chain hash || record digest)`; the chain hash "before" the first record is
/// 32 zero bytes ([`ChainHash::GENESIS`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct ChainHash([u8; 32]);

impl ChainHash {
    /// The chain hash that precedes the first record.
    pub const GENESIS: ChainHash = ChainHash([0; 32]);

    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> ChainHash {
        ChainHash(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The chain hash of the record with `digest` that follows `self`.
    pub fn link(&self, digest: &EvidenceDigest) -> ChainHash {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.0);
        hasher.update(digest.as_bytes());
        ChainHash(*hasher.finalize().as_bytes())
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses 64 hex characters.
    pub fn from_hex(hex: &str) -> Option<ChainHash> {
        blake3::Hash::from_hex(hex).ok().map(|h| ChainHash(*h.as_bytes()))
    }
}

impl std::fmt::Debug for ChainHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChainHash({})", &self.to_hex()[..16])
    }
}

impl std::fmt::Display for ChainHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl serde::Serialize for ChainHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_is_blake3_of_concatenation() {
        let digest = EvidenceDigest::from_bytes([7; 32]);
        let mut input = [0u8; 64];
        input[32..].copy_from_slice(&[7; 32]);
        assert_eq!(ChainHash::GENESIS.link(&digest).as_bytes(), blake3::hash(&input).as_bytes());
        assert_ne!(
            ChainHash::GENESIS.link(&digest).link(&digest),
            ChainHash::GENESIS.link(&digest)
        );
    }
}
