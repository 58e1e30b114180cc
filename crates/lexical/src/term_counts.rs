//! A document's terms counted: what indexing needs of them, and what documents made of parts
//! (a window of turns) are built from without sorting every term again.

use std::cmp::Ordering;

/// A document's distinct terms with their frequencies, in term order, and its length in terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermCounts<'a> {
    counts: Vec<(&'a str, u32)>,
    len: u32,
}

impl<'a> TermCounts<'a> {
    /// The counts of the document whose terms are `terms` (in any order).
    pub fn of<S: AsRef<str>>(terms: &'a [S]) -> TermCounts<'a> {
        let len = u32::try_from(terms.len()).unwrap_or(u32::MAX);
        let mut sorted: Vec<&str> = terms.iter().map(AsRef::as_ref).collect();
        sorted.sort_unstable();
        let mut counts: Vec<(&str, u32)> = Vec::new();
        for term in sorted {
            match counts.last_mut() {
                Some((last, tf)) if *last == term => *tf += 1,
                _ => counts.push((term, 1)),
            }
        }
        TermCounts { counts, len }
    }

    /// The counts of the document made of `parts`, in order: under an analyzer additive at line
    /// breaks, those of the parts' texts joined by line breaks.
    pub fn joined<'p>(parts: impl IntoIterator<Item = &'p TermCounts<'a>>) -> TermCounts<'a>
    where
        'a: 'p,
    {
        let mut joined = TermCounts::default();
        for part in parts {
            joined.counts = merge(&joined.counts, &part.counts);
            joined.len = joined.len.saturating_add(part.len);
        }
        joined
    }

    /// The distinct terms with their frequencies, in term order.
    pub fn counts(&self) -> &[(&'a str, u32)] {
        &self.counts
    }

    /// The document's length in terms.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the document has no term.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Two term-ordered count lists as one, frequencies of a shared term added.
fn merge<'a>(a: &[(&'a str, u32)], b: &[(&'a str, u32)]) -> Vec<(&'a str, u32)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(b[j].0) {
            Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            Ordering::Equal => {
                out.push((a[i].0, a[i].1.saturating_add(b[j].1)));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn joined_counts_are_the_counts_of_the_joined_terms(
            parts in proptest::collection::vec(
                proptest::collection::vec("[a-d]{1,2}", 0..12), 0..6),
        ) {
            let counted: Vec<TermCounts<'_>> = parts.iter().map(|p| TermCounts::of(p)).collect();
            let all: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
            prop_assert_eq!(TermCounts::joined(&counted), TermCounts::of(&all));
        }
    }

    #[test]
    fn counts_are_distinct_terms_in_order() {
        let counts = TermCounts::of(&["b", "a", "b", "c", "b"]);
        assert_eq!(counts.counts(), &[("a", 1), ("b", 3), ("c", 1)]);
        assert_eq!(counts.len(), 5);
        assert!(TermCounts::of::<&str>(&[]).is_empty());
    }
}
