//! Vectors as pgvector text literals.

use std::fmt::Write;

/// `vector` scaled to unit length (the exact index stores unit vectors too, so scores mean the
/// same in both), or why it cannot be. The norm is summed in `f64` so a long vector of small
/// components does not lose its low bits.
pub(crate) fn unit(vector: &[f32]) -> Result<Vec<f32>, &'static str> {
    if vector.iter().any(|x| !x.is_finite()) {
        return Err("a component is NaN or infinite");
    }
    let norm = vector.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err("its norm is zero");
    }
    Ok(vector.iter().map(|&x| (f64::from(x) / norm) as f32).collect())
}

/// `[x1,x2,...]`: Rust writes each `f32` in the shortest decimal form that parses back to the
/// same bits, and pgvector parses it with `strtof`, so the stored vector is the one sent.
pub(crate) fn text(vector: &[f32]) -> String {
    let mut out = String::with_capacity(vector.len() * 12 + 2);
    out.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write!(out, "{x:e}").expect("writing to a String cannot fail");
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_reads_back_bit_for_bit() {
        let v = [0.1f32, -1.0e-30, 3.402_823_5e38, f32::MIN_POSITIVE, -0.0];
        let literal = text(&v);
        let parsed: Vec<f32> = literal
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(
            parsed.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn unusable_vectors_are_refused() {
        assert!(unit(&[0.0, 0.0]).is_err());
        assert!(unit(&[f32::NAN, 1.0]).is_err());
        assert!(unit(&[f32::INFINITY, 1.0]).is_err());
        let u = unit(&[3.0, 4.0]).unwrap();
        assert!((u[0] - 0.6).abs() < 1e-7 && (u[1] - 0.8).abs() < 1e-7);
    }
}
