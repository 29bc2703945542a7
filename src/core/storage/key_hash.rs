//! 128-bit hashes of sample keys, laid out as Arrow lays out a string array (one buffer of
//! bytes, one of offsets): what a resume after a dataset change joins the saved keys with the
//! storage's on, 16 bytes a key, where a hash table of the strings took about 140.
//!
//! Two SipHash-1-3 values (the standard library's `DefaultHasher`, fixed keys), each over the
//! key after a different leading byte: independent enough that two different keys agree on
//! both with probability about 2^-128 (about 10^-23 over 10^8 keys). The hashes are only
//! compared within one process, so the standard library not promising the same values across
//! Rust releases does not matter.

use std::hash::{DefaultHasher, Hasher};

use rayon::prelude::*;

/// Why a set of offsets does not describe keys in a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum OffsetsError {
    /// An offset is negative, smaller than the one before it, or past the end of the bytes.
    OutOfBounds { index: usize, offset: i64, bytes: usize },
}

impl std::fmt::Display for OffsetsError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffsetsError::OutOfBounds { index, offset, bytes } => {
                write!(formatter, "key offset {index} is {offset}: not within the {bytes} bytes of keys, or before the offset ahead of it")
            }
        }
    }
}

/// The two halves of one key's hash.
pub fn hash_key(key: &[u8]) -> (u64, u64) {
    let mut first = DefaultHasher::new();
    first.write_u8(0);
    first.write(key);
    let mut second = DefaultHasher::new();
    second.write_u8(1);
    second.write(key);
    (first.finish(), second.finish())
}

/// The hashes of the keys `data[offsets[i]..offsets[i + 1]]`, one pair a key (`offsets.len() - 1`
/// of them), in parallel. Every offset is checked before a key is read.
pub fn hash_keys(offsets: &[i64], data: &[u8]) -> Result<(Vec<u64>, Vec<u64>), OffsetsError> {
    let mut before = 0i64;
    for (index, &offset) in offsets.iter().enumerate() {
        let past_end = usize::try_from(offset).map_or(true, |end| end > data.len());
        if offset < before || past_end {
            return Err(OffsetsError::OutOfBounds { index, offset, bytes: data.len() });
        }
        before = offset;
    }
    // Checked above: every offset is within `data` and not below the one before it.
    let spans: Vec<(u64, u64)> = offsets.par_windows(2).map(|pair| hash_key(&data[pair[0] as usize..pair[1] as usize])).collect();
    Ok(spans.into_iter().unzip())
}

#[cfg(test)]
mod tests {
    use super::{hash_key, hash_keys, OffsetsError};

    #[test]
    fn each_key_hashes_as_it_does_alone() {
        let data = b"alphabetagamma";
        let (first, second) = hash_keys(&[0, 5, 9, 9, 14], data).unwrap();
        let expected: Vec<(u64, u64)> = [&b"alpha"[..], b"beta", b"", b"gamma"].iter().map(|key| hash_key(key)).collect();
        assert_eq!(first, expected.iter().map(|pair| pair.0).collect::<Vec<_>>());
        assert_eq!(second, expected.iter().map(|pair| pair.1).collect::<Vec<_>>());
    }

    #[test]
    fn different_keys_differ_and_the_halves_differ() {
        let (a, b) = (hash_key(b"sample-1"), hash_key(b"sample-2"));
        assert_ne!(a.0, b.0);
        assert_ne!(a.1, b.1);
        assert_ne!(a.0, a.1);
    }

    #[test]
    fn bad_offsets_are_refused_by_index() {
        assert_eq!(hash_keys(&[0, 3, 2], b"abc"), Err(OffsetsError::OutOfBounds { index: 2, offset: 2, bytes: 3 }));
        assert_eq!(hash_keys(&[0, 4], b"abc"), Err(OffsetsError::OutOfBounds { index: 1, offset: 4, bytes: 3 }));
        assert_eq!(hash_keys(&[-1, 2], b"abc"), Err(OffsetsError::OutOfBounds { index: 0, offset: -1, bytes: 3 }));
        assert_eq!(hash_keys(&[], b""), Ok((vec![], vec![])));
    }
}
