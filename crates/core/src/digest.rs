//! Content digests (BLAKE3): of a whole evidence record, and of a text alone.

use serde::{Deserialize, Serialize};

macro_rules! digest_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; 32]);

        impl $name {
            /// Wraps raw digest bytes.
            pub const fn from_bytes(bytes: [u8; 32]) -> $name {
                $name(bytes)
            }
            /// The raw digest bytes.
            pub const fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }
            /// Lowercase hex, 64 characters.
            pub fn to_hex(&self) -> String {
                blake3::Hash::from_bytes(self.0).to_hex().to_string()
            }
            /// Parses 64 hex characters.
            pub fn from_hex(hex: &str) -> Option<$name> {
                blake3::Hash::from_hex(hex).ok().map(|h| $name(*h.as_bytes()))
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), &self.to_hex()[..16])
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_hex())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                $name::from_hex(&raw)
                    .ok_or_else(|| serde::de::Error::custom("expected 64 hex characters"))
            }
        }
    };
}

digest_newtype!(
    /// BLAKE3 of the canonical encoding of one evidence record (see the ledger format): what the
    /// record is, independent of where it sits in the ledger.
    EvidenceDigest
);

digest_newtype!(
    /// BLAKE3 of a text's UTF-8 bytes alone: the content address of embeddings and caches, shared
    /// across namespaces.
    TextDigest
);

impl TextDigest {
    /// The digest of `text`.
    pub fn of(text: &str) -> TextDigest {
        TextDigest(*blake3::hash(text.as_bytes()).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let d = TextDigest::of("hello");
        assert_eq!(TextDigest::from_hex(&d.to_hex()), Some(d));
        assert_eq!(d.to_hex(), blake3::hash(b"hello").to_hex().to_string());
        assert_eq!(TextDigest::from_hex("zz"), None);
    }
}
