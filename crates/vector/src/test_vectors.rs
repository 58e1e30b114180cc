//! Clustered test vectors: sentence embeddings cluster, and uniform random vectors would flatter
//! nothing and exercise no near-ties.

use rand::{Rng, SeedableRng, rngs::StdRng};

/// `n` vectors of `dim`, each a random one of 8 centres moved by up to 0.3 per dimension.
pub(crate) fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    clustered_around(n, dim, 8, 0.3, seed)
}

/// `n` vectors of `dim`, each a random one of `centres` centres (uniform in -1..1) moved by up to
/// `spread` per dimension.
pub(crate) fn clustered_around(
    n: usize,
    dim: usize,
    centres: usize,
    spread: f32,
    seed: u64,
) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let centers: Vec<Vec<f32>> =
        (0..centres).map(|_| (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect()).collect();
    (0..n)
        .map(|_| {
            let c = &centers[rng.random_range(0..centers.len())];
            c.iter().map(|x| x + rng.random_range(-spread..spread)).collect()
        })
        .collect()
}
