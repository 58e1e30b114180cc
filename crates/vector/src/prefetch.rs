//! Cache-line prefetch hints for rows read at scattered places (the candidates a sketch or a seed
//! set chose): their misses then overlap the work on the rows before them instead of stalling it.

/// Asks the processor to bring every cache line of `row` toward its first-level cache, without
/// waiting for it. Only a hint: nothing is read, and it has no effect off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = std::mem::size_of_val(row);
        let base = row.as_ptr().cast::<i8>();
        // From the start of the first line: a row that does not start on a line boundary ends
        // on one line more than its size says.
        let skew = base as usize % 64;
        for offset in (0..bytes + skew).step_by(64).map(|o| o.saturating_sub(skew)) {
            // SAFETY: `_mm_prefetch` is a hint that never faults and writes nothing, and SSE, the
            // only feature it needs, is part of every x86-64 processor; the address is inside
            // `row`, so the pointer arithmetic stays in its allocation.
            #[allow(unsafe_code)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(base.add(offset))
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// `rows` in turn, the data `row_of` gives for the row `ahead` places further on prefetched as
/// each is given (the first `ahead` before the first), so that a pass over rows at scattered
/// places waits for few of them.
pub(crate) fn prefetched<'a, T: 'a>(
    rows: &'a [u32],
    ahead: usize,
    row_of: impl Fn(u32) -> &'a [T] + 'a,
) -> impl Iterator<Item = u32> + 'a {
    rows.iter().take(ahead).for_each(|&row| prefetch(row_of(row)));
    rows.iter().enumerate().map(move |(i, &row)| {
        if let Some(&next) = rows.get(i + ahead) {
            prefetch(row_of(next));
        }
        row
    })
}
