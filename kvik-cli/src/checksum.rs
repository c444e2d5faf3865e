//! CRC-32 of the bytes a command moved: IEEE, what `zlib.crc32` computes.

/// A CRC-32 as 8 lowercase hex digits.
pub fn crc_hex(crc: u32) -> String {
    format!("{crc:08x}")
}

/// Update a CRC-32 with `bytes`, hashing large inputs in parallel chunks
/// and combining them in order.
pub fn crc_update(hasher: &mut crc32fast::Hasher, bytes: &[u8]) {
    use rayon::prelude::*;
    const CHUNK: usize = 16 << 20;
    if bytes.len() <= CHUNK {
        hasher.update(bytes);
        return;
    }
    let parts: Vec<crc32fast::Hasher> = bytes
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut h = crc32fast::Hasher::new();
            h.update(chunk);
            h
        })
        .collect();
    for part in parts {
        hasher.combine(&part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_zlib_for_the_check_string_and_in_parallel() {
        let mut h = crc32fast::Hasher::new();
        crc_update(&mut h, b"123456789");
        assert_eq!(crc_hex(h.finalize()), "cbf43926");
        // Chunked and combined equals one pass.
        let data: Vec<u8> = (0..(40 << 20) + 7).map(|i| (i * 7 + i / 3) as u8).collect();
        let mut parallel = crc32fast::Hasher::new();
        crc_update(&mut parallel, &data);
        assert_eq!(parallel.finalize(), crc32fast::hash(&data));
    }
}
