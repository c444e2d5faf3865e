//! Files that are not a cufile.json at all: binary garbage, nesting a
//! hundred thousand deep, 100 MB, endless devices. Each gives a clear error
//! or diagnostics, in bounded memory and time; none panics or hangs.

use std::io::Write as _;

use cufile_config::{
    ConfigError, FileKind, MAX_FILE_BYTES, ParsedConfig, Severity, ValidateOptions,
};

fn options() -> ValidateOptions {
    ValidateOptions::default()
}

#[test]
fn a_100_mb_file_is_refused_by_its_size_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cufile.json");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    out.write_all(b"{ \"execution\": { \"max_io_threads\": 4 }, \"x\": [")
        .unwrap();
    let chunk = "12345678, ".repeat(1 << 16);
    let mut written = 0;
    while written < 100 << 20 {
        out.write_all(chunk.as_bytes()).unwrap();
        written += chunk.len();
    }
    out.write_all(b"1] }").unwrap();
    drop(out);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 100 << 20);
    match ParsedConfig::read(&path, &options()) {
        Err(err @ ConfigError::TooLarge { .. }) => {
            let text = err.to_string();
            assert!(text.contains(path.to_str().unwrap()), "{text}");
            assert!(text.contains(&format!("{size} bytes")), "{text}");
            assert!(text.contains("is it the right file?"), "{text}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn only_a_regular_file_is_read_and_a_fifo_or_a_device_never_waits() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    make_fifo(&fifo);
    let socket = dir.path().join("socket.json");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    for (path, kind) in [
        (fifo.as_path(), FileKind::Fifo),
        (socket.as_path(), FileKind::Socket),
        ("/dev/zero".as_ref(), FileKind::CharacterDevice),
        ("/dev/null".as_ref(), FileKind::CharacterDevice),
        (dir.path(), FileKind::Directory),
    ] {
        match ParsedConfig::read(path, &options()) {
            Err(err @ ConfigError::NotAFile { .. }) => {
                let ConfigError::NotAFile { kind: found, .. } = &err else {
                    unreachable!()
                };
                assert_eq!(*found, kind, "{}", path.display());
                let text = err.to_string();
                assert!(text.contains(path.to_str().unwrap()), "{text}");
                assert!(text.contains(kind.describe()), "{text}");
            }
            other => panic!("{}: expected NotAFile, got {other:?}", path.display()),
        }
    }
}

#[test]
fn a_proc_file_that_says_it_is_empty_is_read_to_its_end() {
    // /proc files report size 0: the size is not taken as the content's.
    let parsed = ParsedConfig::read("/proc/self/status".as_ref(), &options()).unwrap();
    assert!(parsed.has_errors(), "it is not JSON");
    assert_eq!(parsed.diagnostics[0].line, 1);
}

/// `mkfifo PATH`.
fn make_fifo(path: &std::path::Path) {
    use rustix::fs::{FileType, Mode};
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[test]
fn a_file_just_under_the_limit_on_one_line_is_validated() {
    // One line, two hundred thousand values, not all ASCII: every
    // position's column used to be counted from the start of the line
    // (minutes at this size).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cufile.json");
    let mut text = String::from("{ \"x\": [");
    while text.len() < MAX_FILE_BYTES as usize - 100 {
        text.push_str("1,\"é\",");
    }
    text.push_str("1], \"execution\": { \"max_io_threads\": -1 } }");
    std::fs::write(&path, &text).unwrap();
    let parsed = ParsedConfig::read(&path, &options()).unwrap();
    let errors: Vec<_> = parsed
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "execution.max_io_threads");
    let column = text[..text.find("-1").unwrap()].chars().count() + 1;
    assert_eq!(
        (errors[0].line, errors[0].column),
        (1, column),
        "{errors:?}"
    );
}

#[test]
fn nesting_a_hundred_thousand_deep_is_one_error() {
    for text in [
        "[".repeat(100_000) + &"]".repeat(100_000),
        "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000),
        format!(
            "{{\"execution\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    ] {
        let parsed = ParsedConfig::parse(&text);
        assert!(parsed.has_errors());
        assert!(
            parsed
                .diagnostics
                .iter()
                .any(|d| d.message.contains("nested more than 512 deep")),
            "{:?}",
            parsed.diagnostics
        );
        let _ = parsed.render("deep.json");
    }
}

#[test]
fn binary_garbage_is_diagnosed_not_trusted() {
    // Every byte value, in a scrambled order, many times over.
    let garbage: Vec<u8> = (0..256 * 64u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let parsed = ParsedConfig::from_bytes(&garbage, &options());
    assert!(parsed.has_errors());
    assert!(
        parsed
            .diagnostics
            .iter()
            .any(|d| d.message.contains("not valid UTF-8")),
        "{:?}",
        parsed.diagnostics
    );
    assert_eq!(parsed.config, cufile_config::CufileConfig::default());
    let rendered = parsed.render("garbage.bin");
    assert!(rendered.lines().count() >= 2, "{rendered}");
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for path in [dir.path().join("missing.json")] {
        match ParsedConfig::read(&path, &options()) {
            Err(err @ ConfigError::Read { .. }) => {
                assert!(err.to_string().contains(path.to_str().unwrap()), "{err}");
            }
            other => panic!("{}: expected Read, got {other:?}", path.display()),
        }
    }
}
