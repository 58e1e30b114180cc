//! The map between a vector's key (a `TurnId` for turns) and its dense row inside one index.

use std::hash::Hash;

use rustc_hash::FxHashMap;

/// Row of a vector inside one vector index. Meaningless outside that index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VectorRow(u32);

impl VectorRow {
    /// The row as an array index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Keys to rows and back. Rows are assigned densely in insertion order.
#[derive(Debug, Clone)]
pub struct RowMap<K> {
    keys: Vec<K>,
    /// Whether every key was pushed above the one before it and no row has moved since (rows
    /// then follow keys, and the rows of the keys up to one are the first few).
    ascending: bool,
    /// Fx rather than SipHash: the keys are ids the ledger assigns, and a search among given
    /// keys looks one up per key.
    rows: FxHashMap<K, VectorRow>,
}

impl<K: Copy + Eq + Hash + Ord> RowMap<K> {
    /// An empty map.
    pub fn new() -> RowMap<K> {
        RowMap { keys: Vec::new(), ascending: true, rows: FxHashMap::default() }
    }

    /// Assigns the next row to `key`; `None` if the key is present or rows are exhausted.
    pub fn push(&mut self, key: K) -> Option<VectorRow> {
        if self.rows.contains_key(&key) {
            return None;
        }
        let row = VectorRow(u32::try_from(self.keys.len()).ok()?);
        self.ascending &= self.keys.last().is_none_or(|&last| last < key);
        self.keys.push(key);
        self.rows.insert(key, row);
        Some(row)
    }

    /// Removes `key`, giving its row to the key of the last row so rows stay dense; the row `key`
    /// held, or `None` when it is absent.
    pub fn swap_remove(&mut self, key: K) -> Option<VectorRow> {
        let row = self.rows.remove(&key)?;
        self.keys.swap_remove(row.index());
        if let Some(&moved) = self.keys.get(row.index()) {
            self.rows.insert(moved, row);
            self.ascending = false;
        }
        Some(row)
    }

    /// The key at `row`.
    pub fn key(&self, row: VectorRow) -> Option<K> {
        self.keys.get(row.index()).copied()
    }

    /// The row of `key`.
    pub fn row(&self, key: K) -> Option<VectorRow> {
        self.rows.get(&key).copied()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no row is assigned.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every key, by row.
    pub fn keys(&self) -> &[K] {
        &self.keys
    }

    /// How many rows hold keys up to `key`, where rows follow keys (the rows of those keys are
    /// then the first that many); `None` otherwise.
    pub fn rows_up_to(&self, key: K) -> Option<usize> {
        self.ascending.then(|| self.keys.partition_point(|&k| k <= key))
    }
}

impl<K: Copy + Eq + Hash + Ord> Default for RowMap<K> {
    fn default() -> RowMap<K> {
        RowMap::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_duplicates() {
        let mut map = RowMap::new();
        let a = map.push(10u64).unwrap();
        let b = map.push(7u64).unwrap();
        assert_eq!((a.index(), b.index()), (0, 1));
        assert_eq!(map.push(10), None);
        assert_eq!((map.key(b), map.row(10)), (Some(7), Some(a)));
    }

    #[test]
    fn swap_remove_moves_the_last_key_into_the_freed_row() {
        let mut map = RowMap::new();
        for key in [10u64, 7, 3] {
            map.push(key).unwrap();
        }
        assert_eq!(map.swap_remove(10).map(VectorRow::index), Some(0));
        assert_eq!(map.keys(), &[3, 7]);
        assert_eq!((map.row(3).map(VectorRow::index), map.row(10)), (Some(0), None));
        assert_eq!(map.swap_remove(10), None);
        assert_eq!(map.swap_remove(7).map(VectorRow::index), Some(1));
        assert_eq!(map.keys(), &[3]);
        assert_eq!(map.push(7).map(VectorRow::index), Some(1));
    }

    #[test]
    fn bounds_rows_by_key_only_while_rows_follow_keys() {
        let mut map = RowMap::new();
        assert_eq!(map.rows_up_to(5u64), Some(0));
        for key in [2u64, 4, 6, 8] {
            map.push(key).unwrap();
        }
        let bounds: Vec<_> = [1, 2, 5, 8, 9].map(|k| map.rows_up_to(k)).into();
        assert_eq!(bounds, [Some(0), Some(1), Some(2), Some(4), Some(4)]);
        // Removing the last row moves none.
        map.swap_remove(8).unwrap();
        assert_eq!(map.rows_up_to(9), Some(3));
        // A key below the last one, or a row moved by a removal, and rows no longer follow keys.
        let mut pushed_low = map.clone();
        pushed_low.push(3).unwrap();
        assert_eq!(pushed_low.rows_up_to(9), None);
        map.swap_remove(2).unwrap();
        assert_eq!(map.keys(), &[6, 4]);
        assert_eq!(map.rows_up_to(9), None);
    }
}
