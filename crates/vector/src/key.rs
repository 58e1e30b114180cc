//! Keys a vector index can hold and write to disk.

use std::{fmt::Debug, hash::Hash};

use evicortex_core::TurnId;

/// A vector's key: hashable, ordered (ties between equal scores go to the smaller key) and with
/// a fixed-width little-endian encoding for index files.
pub trait IndexKey: Copy + Eq + Hash + Ord + Debug + Send + Sync {
    /// Tag written in index files, so a file is never read back under another key type.
    const TAG: u8;
    /// Bytes of the encoding.
    const BYTES: usize;
    /// Appends the encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Reads a key from exactly [`IndexKey::BYTES`] bytes.
    fn decode(bytes: &[u8]) -> Self;
}

impl IndexKey for TurnId {
    const TAG: u8 = 1;
    const BYTES: usize = 8;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.raw().to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> TurnId {
        TurnId::from_raw(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }
}

/// A window of a turn: the turn and the window's number.
impl IndexKey for (TurnId, u32) {
    const TAG: u8 = 2;
    const BYTES: usize = 12;

    fn encode(&self, out: &mut Vec<u8>) {
        self.0.encode(out);
        out.extend_from_slice(&self.1.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> (TurnId, u32) {
        let (turn, window) = bytes.split_at(8);
        (TurnId::decode(turn), u32::from_le_bytes(window.try_into().expect("4 bytes")))
    }
}

/// Plain numbers (chunks of the evaluation's comparator, tests).
impl IndexKey for u32 {
    const TAG: u8 = 3;
    const BYTES: usize = 4;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> u32 {
        u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<K: IndexKey>(key: K) {
        let mut bytes = Vec::new();
        key.encode(&mut bytes);
        assert_eq!(bytes.len(), K::BYTES);
        assert_eq!(K::decode(&bytes), key);
    }

    #[test]
    fn keys_round_trip() {
        round_trip(TurnId::from_raw(u64::MAX - 3));
        round_trip((TurnId::from_raw(7), 3u32));
        round_trip(42u32);
    }
}
