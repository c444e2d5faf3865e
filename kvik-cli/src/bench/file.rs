//! The file a run measures: a named one (created with random bytes when
//! missing, then kept) or a temporary one (removed afterwards), and the
//! scratch file writes go to.

use std::path::{Path, PathBuf};

use super::args::Args;
use crate::CliError;
use crate::args::Location;

/// The benchmark file and whether this run owns it.
pub(super) struct BenchFile {
    pub path: PathBuf,
    pub created: bool,
    pub remove: bool,
}

impl Drop for BenchFile {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A file this run writes to and always removes.
pub(super) struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) fn prepare_file(args: &Args, pattern: &[u8]) -> Result<BenchFile, CliError> {
    let (path, named) = match &args.file {
        Some(Location::Path(p)) => (p.clone(), true),
        Some(Location::Url(_)) => unreachable!("a remote object is measured by bench::remote"),
        None => {
            let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
            if !dir.is_dir() {
                return Err(CliError::Usage(format!(
                    "--dir {} is not a directory",
                    dir.display()
                )));
            }
            (
                dir.join(format!("kvik-bench-{}.bin", std::process::id())),
                false,
            )
        }
    };
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(CliError::Usage(format!(
                "--file {} is a directory",
                path.display()
            )));
        }
        Ok(meta) if meta.len() >= args.size => {
            return Ok(BenchFile {
                path,
                created: false,
                remove: false,
            });
        }
        Ok(meta) if named => {
            return Err(CliError::Usage(format!(
                "--file {} has {} bytes, less than --size {}; name a new file (it is created) \
                 or ask for less",
                path.display(),
                meta.len(),
                args.size
            )));
        }
        _ => {}
    }
    use std::io::Write as _;
    let file = BenchFile {
        remove: !named && !args.keep,
        path,
        created: true,
    };
    let fail =
        |e: std::io::Error| CliError::Failed(format!("cannot create {}: {e}", file.path.display()));
    let mut out = std::fs::File::create(&file.path).map_err(fail)?;
    out.write_all(pattern).map_err(fail)?;
    out.sync_data().map_err(fail)?;
    Ok(file)
}

/// `dir/.name.kvik-bench-<what>-<pid>` next to `path`.
pub(super) fn sibling(path: &Path, what: &str) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(".{name}.kvik-bench-{what}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::super::args::tests::parse;
    use super::*;

    #[test]
    fn a_short_named_file_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        std::fs::write(&path, b"abc").unwrap();
        let args = parse(&["--file", path.to_str().unwrap(), "--size", "4KiB"]).unwrap();
        let Err(CliError::Usage(e)) = prepare_file(&args, &[0u8; 4096]) else {
            panic!("a short file was accepted");
        };
        assert!(e.contains("less than --size"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    }
}
