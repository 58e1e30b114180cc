//! The HNSW graph: each row's level and its links on every layer up to it.

/// Marks an absent row (no entry point yet).
pub(crate) const NO_ROW: u32 = u32::MAX;

/// Highest level a row can get (the level distribution makes anything above ~6 vanishingly rare
/// at a million rows; the cap bounds the file format).
pub(crate) const MAX_LEVEL: u8 = 16;

/// Links by layer. Layer 0 holds up to `2m` links per row in one flat array; the upper layers,
/// which only a `1/m` fraction of rows reach, hold up to `m` links in a list per (row, layer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Graph {
    m: usize,
    levels: Vec<u8>,
    links0: Vec<u32>,
    len0: Vec<u8>,
    /// Per row: index in `upper` of its layer-1 list, [`NO_ROW`] for rows on layer 0 only.
    upper_start: Vec<u32>,
    upper: Vec<Vec<u32>>,
    entry: u32,
}

impl Graph {
    /// An empty graph with `m` links per row on the upper layers and `2m` on layer 0.
    pub(crate) fn new(m: usize) -> Graph {
        assert!((2..=127).contains(&m), "m must be in 2..=127");
        Graph {
            m,
            levels: Vec::new(),
            links0: Vec::new(),
            len0: Vec::new(),
            upper_start: Vec::new(),
            upper: Vec::new(),
            entry: NO_ROW,
        }
    }

    /// Links a row may hold on `layer`.
    pub(crate) fn capacity(&self, layer: u8) -> usize {
        if layer == 0 { 2 * self.m } else { self.m }
    }

    /// Links chosen for a newly inserted row on every layer.
    pub(crate) fn m(&self) -> usize {
        self.m
    }

    pub(crate) fn rows(&self) -> usize {
        self.levels.len()
    }

    pub(crate) fn level(&self, row: u32) -> u8 {
        self.levels[row as usize]
    }

    /// The row searches start from (the first row to reach the highest level), if any row is
    /// linked.
    pub(crate) fn entry(&self) -> Option<u32> {
        (self.entry != NO_ROW).then_some(self.entry)
    }

    pub(crate) fn set_entry(&mut self, row: u32) {
        self.entry = row;
    }

    /// Adds a row with no links.
    pub(crate) fn push_row(&mut self, level: u8) {
        let cap0 = self.capacity(0);
        self.levels.push(level);
        self.links0.extend(std::iter::repeat_n(NO_ROW, cap0));
        self.len0.push(0);
        if level == 0 {
            self.upper_start.push(NO_ROW);
        } else {
            self.upper_start.push(u32::try_from(self.upper.len()).expect("fewer than 2^32 lists"));
            for _ in 0..level {
                self.upper.push(Vec::new());
            }
        }
    }

    pub(crate) fn neighbors(&self, row: u32, layer: u8) -> &[u32] {
        let row = row as usize;
        if layer == 0 {
            let start = row * self.capacity(0);
            &self.links0[start..start + self.len0[row] as usize]
        } else {
            &self.upper[self.upper_start[row] as usize + layer as usize - 1]
        }
    }

    pub(crate) fn set_neighbors(&mut self, row: u32, layer: u8, links: &[u32]) {
        debug_assert!(links.len() <= self.capacity(layer));
        debug_assert!(layer <= self.level(row));
        let row = row as usize;
        if layer == 0 {
            let cap0 = self.capacity(0);
            let start = row * cap0;
            self.links0[start..start + links.len()].copy_from_slice(links);
            self.links0[start + links.len()..start + cap0].fill(NO_ROW);
            self.len0[row] = links.len() as u8;
        } else {
            let list = &mut self.upper[self.upper_start[row] as usize + layer as usize - 1];
            list.clear();
            list.extend_from_slice(links);
        }
    }

    /// Heap bytes of the links and levels.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.levels.len() * 6
            + self.links0.len() * 4
            + self.upper.iter().map(|l| l.capacity() * 4 + 24).sum::<usize>()
    }
}

/// The level of `row`: `floor(-ln(u) / ln(m))` for `u` uniform in (0, 1], drawn from a hash of the
/// row and the seed, so that it depends on nothing else (not on insertion batches or threads).
pub(crate) fn level_of(row: u32, seed: u64, m: usize) -> u8 {
    let bits = splitmix64(seed ^ u64::from(row).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let u = ((bits >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let level = (-u.ln() / (m as f64).ln()).floor();
    level.min(f64::from(MAX_LEVEL)) as u8
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_geometric_distribution() {
        let m = 16;
        let levels: Vec<u8> = (0..200_000).map(|r| level_of(r, 7, m)).collect();
        let above0 = levels.iter().filter(|&&l| l >= 1).count() as f64 / levels.len() as f64;
        let above1 = levels.iter().filter(|&&l| l >= 2).count() as f64 / levels.len() as f64;
        assert!((above0 - 1.0 / 16.0).abs() < 0.005, "{above0}");
        assert!((above1 - 1.0 / 256.0).abs() < 0.001, "{above1}");
        assert_eq!(level_of(12, 7, m), level_of(12, 7, m));
    }

    #[test]
    fn links_are_stored_per_layer() {
        let mut graph = Graph::new(4);
        graph.push_row(0);
        graph.push_row(2);
        graph.set_neighbors(1, 0, &[0]);
        graph.set_neighbors(1, 2, &[0, 0]);
        graph.set_neighbors(0, 0, &[1]);
        assert_eq!(graph.neighbors(1, 0), &[0]);
        assert_eq!(graph.neighbors(1, 1), &[] as &[u32]);
        assert_eq!(graph.neighbors(1, 2), &[0, 0]);
        graph.set_neighbors(1, 0, &[]);
        assert_eq!(graph.neighbors(1, 0), &[] as &[u32]);
        assert_eq!(graph.neighbors(0, 0), &[1]);
    }
}
