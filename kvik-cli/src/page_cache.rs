//! How much of a file's range is in the page cache: explains throughput
//! (a cached range reads at memory speed, an uncached one at the
//! storage's).

use std::path::Path;

/// The share of `offset..offset + len` of `path` that is in the page cache
/// (0.0–1.0; `kvik_policy::residency`: `cachestat`, else `mincore`); `None`
/// when it cannot be told.
pub fn residency(path: &Path, offset: u64, len: u64) -> Option<f64> {
    residency_of(&std::fs::File::open(path).ok()?, offset, len)
}

/// [`residency`] of a file already open.
pub fn residency_of(file: &std::fs::File, offset: u64, len: u64) -> Option<f64> {
    if len == 0 {
        return None;
    }
    kvik_policy::residency::residency(file, offset, len)
        .ok()
        .map(|r| r.cached_share())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_written_by_us_is_in_the_page_cache() {
        let dir = std::env::temp_dir().join(format!("kvik-residency-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(residency(&path, 0, 1 << 20), Some(1.0));
        assert_eq!(residency(&path, 0, 0), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
