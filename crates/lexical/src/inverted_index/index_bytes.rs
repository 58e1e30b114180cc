//! A turn index as bytes, so that a store can keep it beside the ledger as derived data and load
//! it instead of analysing every turn again when a process opens the store. The caller frames
//! and checksums the bytes (a damaged file must be caught before this reads it); this checks
//! that what it reads is a well-formed index and rebuilds what it can derive (the key lookup,
//! the term bounds, the total length) rather than trusting stored copies of it.
//!
//! Layout, integers little-endian, `varint` as unsigned LEB128:
//! `k1 f32, b f32, analyzer u8 (0 plain, 1 snowball), covered u8 + u64, documents u32,
//! keys u64 × documents, lengths u32 × documents, terms u32`, then per term
//! `length varint, UTF-8 bytes, postings varint, (row delta varint, tf varint) × postings`.

use std::io::{self, Read, Write};

use evicortex_core::TurnId;

use super::{Bm25Index, BoundNorm, DocRow, TermExtremes};
use crate::{Analyzer, Bm25Params, max_score::Posting};

/// The longest term accepted when reading (the analyzer keeps a whole word, so this bounds a
/// damaged length rather than real text).
const MAX_TERM_BYTES: u64 = 1 << 20;

impl Bm25Index<TurnId> {
    /// Writes the index (see the module docs for the layout).
    pub fn write_to(&self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        out.write_all(&self.params.k1.to_le_bytes())?;
        out.write_all(&self.params.b.to_le_bytes())?;
        out.write_all(&[analyzer_tag(self.analyzer)])?;
        match self.covers {
            Some(covers) => {
                out.write_all(&[1])?;
                out.write_all(&covers.raw().to_le_bytes())?;
            }
            None => out.write_all(&[0; 9])?,
        }
        let documents = u32::try_from(self.keys.len()).map_err(io::Error::other)?;
        out.write_all(&documents.to_le_bytes())?;
        let mut buf = Vec::with_capacity(1 << 16);
        for keys in self.keys.chunks(4096) {
            buf.clear();
            buf.extend(keys.iter().flat_map(|k| k.raw().to_le_bytes()));
            out.write_all(&buf)?;
        }
        for lengths in self.doc_len.chunks(4096) {
            buf.clear();
            buf.extend(lengths.iter().flat_map(|l| l.to_le_bytes()));
            out.write_all(&buf)?;
        }
        let mut terms: Vec<(&str, u32)> =
            self.term_ids.iter().map(|(term, &id)| (term.as_str(), id)).collect();
        // Term ids follow first appearance; writing them in that order keeps them on load.
        terms.sort_unstable_by_key(|&(_, id)| id);
        out.write_all(&(terms.len() as u32).to_le_bytes())?;
        for (term, id) in terms {
            buf.clear();
            put_varint(&mut buf, term.len() as u64);
            buf.extend_from_slice(term.as_bytes());
            let postings = &self.postings[id as usize];
            put_varint(&mut buf, postings.len() as u64);
            let mut previous = 0u32;
            for posting in postings {
                put_varint(&mut buf, u64::from(posting.row - previous));
                put_varint(&mut buf, u64::from(posting.tf));
                previous = posting.row;
            }
            out.write_all(&buf)?;
        }
        Ok(())
    }

    /// Reads an index written by [`Bm25Index::write_to`]. A malformed one (unknown analyzer,
    /// invalid parameters, a repeated key or term, a posting out of order or past the last
    /// document, a frequency of 0 or above the document's length) is an
    /// [`io::ErrorKind::InvalidData`] error; a short one, [`io::ErrorKind::UnexpectedEof`].
    pub fn read_from(input: &mut (impl Read + ?Sized)) -> io::Result<Bm25Index<TurnId>> {
        let k1 = f32::from_le_bytes(array(input)?);
        let b = f32::from_le_bytes(array(input)?);
        let params = Bm25Params { k1, b }.validate().map_err(invalid)?;
        let analyzer = match array::<1>(input)?[0] {
            0 => Analyzer::Plain,
            1 => Analyzer::EnglishSnowball,
            tag => return Err(invalid(format!("analyzer tag {tag}"))),
        };
        let mut index = Bm25Index::with_analyzer(params, analyzer);
        let (flag, raw) = (array::<1>(input)?[0], u64::from_le_bytes(array(input)?));
        index.covers = match flag {
            0 => None,
            1 => Some(TurnId::from_raw(raw)),
            _ => return Err(invalid(format!("coverage flag {flag}"))),
        };
        let documents = u32::from_le_bytes(array(input)?) as usize;
        // Reserved for what is read, a chunk at a time: `documents` is what the bytes claim.
        let mut bytes = vec![0u8; documents.min(1 << 20) * 8];
        index.keys.reserve(documents.min(1 << 20));
        while index.keys.len() < documents {
            let take = (documents - index.keys.len()).min(1 << 20);
            input.read_exact(&mut bytes[..take * 8])?;
            for chunk in bytes[..take * 8].chunks_exact(8) {
                let key = TurnId::from_raw(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
                let row = DocRow(index.keys.len() as u32);
                if index.rows.insert(key, row).is_some() {
                    return Err(invalid(format!("document {key} appears twice")));
                }
                index.keys_ascending &= index.keys.last().is_none_or(|&last| last < key);
                index.keys.push(key);
            }
        }
        index.doc_len.reserve(documents);
        while index.doc_len.len() < documents {
            let take = (documents - index.doc_len.len()).min(1 << 20);
            input.read_exact(&mut bytes[..take * 4])?;
            index.doc_len.extend(
                bytes[..take * 4]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
            );
        }
        index.total_len = index.doc_len.iter().map(|&l| u64::from(l)).sum();
        if documents > 0 {
            index.bound_norm = BoundNorm::new(params, index.avg_len());
        }
        let part_norm = index.bound_norm.norm;
        let terms = u32::from_le_bytes(array(input)?);
        let mut term_bytes = Vec::new();
        for id in 0..terms {
            let len = varint(input)?;
            if len > MAX_TERM_BYTES {
                return Err(invalid(format!("a term of {len} bytes")));
            }
            term_bytes.resize(len as usize, 0);
            input.read_exact(&mut term_bytes)?;
            let term = std::str::from_utf8(&term_bytes).map_err(invalid)?.to_owned();
            let count = varint(input)?;
            if count > documents as u64 {
                return Err(invalid(format!("term {term:?} in {count} of {documents} documents")));
            }
            let mut postings = Vec::with_capacity(count as usize);
            let mut extremes = TermExtremes { max_tf: 0, min_len: u32::MAX, max_part: 0.0 };
            let mut row = 0u64;
            for i in 0..count {
                let delta = varint(input)?;
                row = row
                    .checked_add(delta)
                    .ok_or_else(|| invalid(format!("term {term:?}: a row past 2^64")))?;
                let tf = varint(input)?;
                let len = index.doc_len.get(row as usize).copied();
                match len {
                    Some(len) if (i == 0 || delta > 0) && tf > 0 && tf <= u64::from(len) => {
                        extremes.max_tf = extremes.max_tf.max(tf as u32);
                        extremes.min_len = extremes.min_len.min(len);
                        extremes.max_part = extremes.max_part.max(part_norm.part(tf as u32, len));
                        postings.push(Posting { row: row as u32, tf: tf as u32 });
                    }
                    _ => return Err(invalid(format!("term {term:?}: posting {row} (tf {tf})"))),
                }
            }
            if index.term_ids.insert(term, id).is_some() {
                return Err(invalid(format!("term {id} repeats an earlier one")));
            }
            index.postings.push(postings);
            index.term_extremes.push(extremes);
        }
        Ok(index)
    }
}

fn analyzer_tag(analyzer: Analyzer) -> u8 {
    match analyzer {
        Analyzer::Plain => 0,
        Analyzer::EnglishSnowball => 1,
    }
}

fn invalid(detail: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, detail.to_string())
}

fn array<const N: usize>(input: &mut (impl Read + ?Sized)) -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint(input: &mut (impl Read + ?Sized)) -> io::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = array::<1>(input)?[0];
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(invalid("a varint longer than 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bm25Index<TurnId> {
        let mut index =
            Bm25Index::with_analyzer(Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::EnglishSnowball);
        let texts = [
            "We adopted a beagle named Max last spring",
            "Max loves the park; the park loves Max",
            "I moved to Lisbon for the new job at v2.3.1 corp",
            "painting and paints, painted walls",
        ];
        for (i, text) in texts.iter().enumerate() {
            index.add(TurnId::from_raw(10 + i as u64 * 3), text).unwrap();
        }
        index
            .replace(TurnId::from_raw(13), texts[1], "Max is a beagle who hates the rain")
            .unwrap();
        index.mark_covered(TurnId::from_raw(19)).unwrap();
        index
    }

    fn bytes(index: &Bm25Index<TurnId>) -> Vec<u8> {
        let mut out = Vec::new();
        index.write_to(&mut out).unwrap();
        out
    }

    #[test]
    fn a_read_index_searches_as_the_written_one_bit_for_bit() {
        let index = sample();
        let read = Bm25Index::read_from(&mut bytes(&index).as_slice()).unwrap();
        assert_eq!(read.len(), index.len());
        assert_eq!(
            (read.covers(), read.params(), read.analyzer()),
            (index.covers(), index.params(), index.analyzer())
        );
        for query in ["beagle Max", "Lisbon job", "paint", "rain park", "absent"] {
            let terms = index.analyze(query);
            assert_eq!(
                read.search(&terms, 10, |_| true),
                index.search(&terms, 10, |_| true),
                "{query}"
            );
            assert_eq!(
                read.search_max_score(&terms, 2, |_| true),
                index.search(&terms, 2, |_| true)
            );
        }
        crate::inverted_index::tests::bounds_hold(&read).unwrap();
        assert_eq!(bytes(&read), bytes(&index), "written again, the same bytes");
    }

    #[test]
    fn damaged_bytes_are_refused_not_loaded() {
        let good = bytes(&sample());
        for cut in [0, 5, 20, good.len() - 1] {
            let err = Bm25Index::read_from(&mut &good[..cut]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}");
        }
        let mut bad_analyzer = good.clone();
        bad_analyzer[8] = 7;
        assert_eq!(
            Bm25Index::read_from(&mut bad_analyzer.as_slice()).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let mut twice = good.clone();
        // The second key (bytes 22..30, after the 22-byte head) made equal to the first.
        let first: [u8; 8] = twice[22..30].try_into().unwrap();
        twice[30..38].copy_from_slice(&first);
        let err = Bm25Index::read_from(&mut twice.as_slice()).unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
    }
}
