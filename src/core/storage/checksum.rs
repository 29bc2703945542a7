//! Checksums of sample bytes: the CRC-32 (zlib's polynomial) that shard indexes record.
//!
//! crc32fast uses the CPU's carry-less multiply (PCLMULQDQ on x86-64, PMULL on ARM) where there
//! is one: several times zlib's table-driven CRC, so verifying every read costs a small share of
//! a decode.

/// zlib's CRC-32 of `data` (what Python's `zlib.crc32` returns).
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::crc32;

    #[test]
    fn matches_zlib() {
        // zlib.crc32(b"123456789") == 0xCBF43926, the CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }
}
