//! The edit scripts of the targets that overwrite stored values: per edit a 4-byte header (its
//! meaning is the target's: which row, which column, which kind of value, a length) and the
//! value's bytes, `header[3] % max_len` of them.

use rusqlite::types::Value;

/// The edits of `data`, at most `count`, each value at most `max_len - 1` bytes.
pub(crate) fn edits(
    mut data: &[u8],
    count: usize,
    max_len: u8,
) -> impl Iterator<Item = ([u8; 4], Vec<u8>)> + '_ {
    let mut take = move |n: usize| {
        let (head, rest) = data.split_at(n.min(data.len()));
        data = rest;
        head.to_vec()
    };
    (0..count).map_while(move |_| {
        let header: [u8; 4] = take(4).try_into().ok()?;
        let raw = take(usize::from(header[3] % max_len));
        Some((header, raw))
    })
}

/// The first 8 bytes of `raw` (zero-padded) as a little-endian integer.
pub(crate) fn int(raw: &[u8]) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.iter_mut().zip(raw).for_each(|(b, r)| *b = *r);
    i64::from_le_bytes(bytes)
}

/// A value of any SQLite type: `kind % 5` picks NULL, an integer, a text, a blob or `real`.
pub(crate) fn sqlite_value(kind: u8, raw: Vec<u8>, real: f64) -> Value {
    match kind % 5 {
        0 => Value::Null,
        1 => Value::Integer(int(&raw)),
        2 => Value::Text(String::from_utf8_lossy(&raw).into_owned()),
        3 => Value::Blob(raw),
        _ => Value::Real(real),
    }
}
