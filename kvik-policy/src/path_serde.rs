//! Paths in JSON without loss. A path that is UTF-8 is a JSON string; one
//! that is not (Linux names are bytes) is an object with both a readable
//! and an exact form:
//!
//! ```json
//! {"lossy": "caf\u{fffd}.bin", "hex": "636166ff2e62696e"}
//! ```
//!
//! `lossy` replaces each invalid sequence with U+FFFD; `hex` is every byte
//! of the name, two lowercase digits each (Python: `bytes.fromhex(hex)`).
//! Serde's own `Path` serializer fails on such paths instead.

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// Serialize `path` as above: `#[serde(serialize_with = "kvik_policy::path_serde::serialize")]`
/// on a `PathBuf`, `&Path`, … field.
pub fn serialize<P, S>(path: &P, s: S) -> Result<S::Ok, S::Error>
where
    P: AsRef<Path> + ?Sized,
    S: serde::Serializer,
{
    use serde::ser::SerializeStruct as _;
    let path = path.as_ref();
    match path.to_str() {
        Some(text) => s.serialize_str(text),
        None => {
            let bytes = path.as_os_str().as_bytes();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut object = s.serialize_struct("Path", 2)?;
            object.serialize_field("lossy", &String::from_utf8_lossy(bytes))?;
            object.serialize_field("hex", &hex)?;
            object.end()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::path::PathBuf;

    #[derive(serde::Serialize)]
    struct Named {
        #[serde(serialize_with = "super::serialize")]
        path: PathBuf,
    }

    fn json(path: &[u8]) -> serde_json::Value {
        let named = Named {
            path: PathBuf::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path)),
        };
        serde_json::to_value(&named).unwrap()["path"].clone()
    }

    #[test]
    fn utf8_paths_are_strings_and_others_keep_every_byte() {
        assert_eq!(json("/data/café.bin".as_bytes()), "/data/café.bin");
        let other = json(b"/data/caf\xff\x01.bin");
        assert_eq!(other["lossy"], "/data/caf\u{fffd}\u{1}.bin");
        assert_eq!(other["hex"], "2f646174612f636166ff012e62696e");
    }
}
