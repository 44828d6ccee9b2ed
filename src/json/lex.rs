//! The lexing the parser, the canonical scanner and the encoder share: the runs of string bytes
//! that need no attention, and the grammar of a number literal. It uses no other part of `json`,
//! so the three use it without importing one another.

/// The end of the run of string bytes starting at `from` that need no attention: the index of
/// the first `"`, `\\` or control character, or the end of `bytes`. Eight bytes at a time (SWAR):
/// strings are most of a config's bytes, and this loop is most of the canonical scan.
#[inline]
pub(super) fn plain_run_end(bytes: &[u8], from: usize) -> usize {
    run_end::<false>(bytes, from)
}

/// [`plain_run_end`], stopping also at the first byte >= 0x80 (the start of a UTF-8 sequence
/// the caller validates).
#[inline]
pub(super) fn plain_ascii_run_end(bytes: &[u8], from: usize) -> usize {
    run_end::<true>(bytes, from)
}

/// The run scan of both: with `ASCII_ONLY`, non-ASCII bytes end the run too.
#[inline]
fn run_end<const ASCII_ONLY: bool>(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// High bit set in each byte of `w` that is zero (exact for the lowest such byte, which is
    /// the one we look for).
    fn zero_bytes(w: u64) -> u64 {
        w.wrapping_sub(ONES) & !w & HIGHS
    }
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // Control characters are the bytes below 0x20: subtracting 0x20 borrows into the high bit
        // (exact for the lowest; bytes >= 0x80 are masked out by `!w`). Non-ASCII bytes, when
        // they end the run, are their own high bits: the lowest flagged byte stays exact, as a
        // borrow only runs upward from a byte that is flagged itself.
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
        let quote = zero_bytes(w ^ (ONES * u64::from(b'"')));
        let backslash = zero_bytes(w ^ (ONES * u64::from(b'\\')));
        let high = if ASCII_ONLY { w & HIGHS } else { 0 };
        let found = control | quote | backslash | high;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 || (ASCII_ONLY && b >= 0x80) {
            break;
        }
        i += 1;
    }
    i
}

/// Where a number literal ends, and whether it is a float (a fraction or an exponent).
pub(super) struct NumberEnd {
    pub(super) end: usize,
    pub(super) is_float: bool,
}

/// Matches `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?` at `start`.
pub(super) fn scan_number(bytes: &[u8], start: usize) -> Option<NumberEnd> {
    let digits = |mut i: usize| {
        let from = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > from).then_some(i)
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i)?,
        _ => return None,
    }
    let mut is_float = false;
    if bytes.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
        is_float = true;
    }
    if let Some(b'e' | b'E') = bytes.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = bytes.get(i) {
            i += 1;
        }
        i = digits(i)?;
        is_float = true;
    }
    Some(NumberEnd { end: i, is_float })
}
