//! A stable content hash for names and records that are stored (snapshot folder names, the
//! baseline's change record): 64-bit FNV-1a, identical across releases and platforms, unlike
//! `std`'s `DefaultHasher`.

/// FNV-1a of the pieces, one after the other (as of their concatenation).
pub fn stable<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    pieces
        .into_iter()
        .flatten()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x100000001b3)
        })
}

/// FNV-1a of `bytes`, as 16 hex digits.
pub fn stable_hex(bytes: &[u8]) -> String {
    format!("{:016x}", stable([bytes]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert_eq!(super::stable_hex(b""), "cbf29ce484222325");
        assert_eq!(super::stable_hex(b"a"), "af63dc4c8601ec8c");
    }
}
