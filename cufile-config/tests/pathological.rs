//! Files of every pathological shape that fits under the 1 MiB cap: many
//! keys in one object, many duplicates, deep nesting with long keys, long
//! strings and keys, comments, escapes, non-ASCII text. Each is validated
//! whole, with the diagnostics it must give, in the normal test run: work
//! that grows faster than the file (comparing every key with every other,
//! copying a deep path for every value, measuring a megabyte-long key
//! against every known key) takes minutes to hours at these sizes, so a
//! quadratic parser does not finish this test. Every diagnostic also stays
//! small, whatever the file: the output is linear in the input too.

use cufile_config::json_path::{MAX_KEY_CHARS, MAX_PATH_BYTES};
use cufile_config::{DiagnosticKind, MAX_FILE_BYTES, ParsedConfig, Severity, ValidateOptions};

const CAP: usize = MAX_FILE_BYTES as usize;

/// `head` + as many `item`s (separated by `separator`) as fit under the cap + `tail`.
fn fill(head: &str, item: &str, separator: &str, tail: &str) -> (String, usize) {
    let room = CAP - head.len() - tail.len();
    let count = (room + separator.len()) / (item.len() + separator.len());
    let mut text = String::with_capacity(CAP);
    text.push_str(head);
    for i in 0..count {
        if i > 0 {
            text.push_str(separator);
        }
        text.push_str(item);
    }
    text.push_str(tail);
    assert!(text.len() <= CAP && text.len() > CAP - item.len() - separator.len() - 1);
    (text, count)
}

/// `head` + numbered items (`make(i)`) while they fit + `tail`.
fn numbered(head: &str, make: impl Fn(usize) -> String, tail: &str) -> (String, usize) {
    let mut text = String::from(head);
    let mut count = 0;
    loop {
        let item = make(count);
        if text.len() + item.len() + 1 + tail.len() > CAP {
            break;
        }
        if count > 0 {
            text.push(',');
        }
        text.push_str(&item);
        count += 1;
    }
    text.push_str(tail);
    (text, count)
}

/// Validates `text` through the file reader (the path every command takes),
/// and checks that every diagnostic is small.
fn validate(name: &str, text: &[u8]) -> ParsedConfig {
    assert!(text.len() <= CAP, "{name}: {} bytes", text.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.json"));
    std::fs::write(&path, text).unwrap();
    let parsed = ParsedConfig::read(&path, &ValidateOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for d in &parsed.diagnostics {
        assert!(
            d.path.len() <= MAX_PATH_BYTES + '…'.len_utf8(),
            "{name}: a path of {} characters",
            d.path.len()
        );
        let size = d.message.len()
            + d.help.as_ref().map_or(0, String::len)
            + d.expected.as_ref().map_or(0, String::len);
        assert!(size <= 2048, "{name}: a diagnostic of {size} bytes");
    }
    let rendered = parsed.render(name);
    assert!(rendered.len() <= 2200 * (parsed.diagnostics.len() + 1));
    parsed
}

fn count(parsed: &ParsedConfig, kind: DiagnosticKind) -> usize {
    parsed.diagnostics.iter().filter(|d| d.kind == kind).count()
}

fn members(parsed: &ParsedConfig, path: &[&str]) -> usize {
    match &parsed
        .root()
        .unwrap()
        .lookup(path.iter().copied())
        .unwrap()
        .value
    {
        cufile_config::jsonc::Value::Object(members) => members.len(),
        other => panic!("not an object: {other:?}"),
    }
}

#[test]
fn ninety_thousand_unknown_keys_in_one_object() {
    let (text, n) = numbered("{", |i| format!("\"k{i}\":1"), "}");
    assert!(n > 90_000, "{n}");
    let parsed = validate("keys", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::UnknownKey), n);
    assert_eq!(members(&parsed, &[]), n);
    assert!(!parsed.has_errors());

    // The same inside a section, where every key would be measured against
    // the section's known keys for a "did you mean".
    let (text, n) = numbered("{\"properties\":{", |i| format!("\"k{i}\":1"), "}}");
    let parsed = validate("section_keys", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::UnknownKey), n);
    // Non-ASCII keys: positions count characters, across checkpoints.
    let (text, n) = numbered("{", |i| format!("\"é{i}\":1"), "}");
    let parsed = validate("unicode_keys", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::UnknownKey), n);
    let last = parsed.diagnostics.last().unwrap();
    assert_eq!(last.line, 1);
    assert_eq!(
        last.column,
        text[..text.rfind("\"é").unwrap()].chars().count() + 1
    );
}

#[test]
fn one_key_repeated_a_hundred_and_fifty_thousand_times() {
    let (text, n) = fill("{", "\"k\":1", ",", "}");
    assert!(n > 150_000, "{n}");
    let parsed = validate("duplicates", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::DuplicateKey), n - 1);
    assert_eq!(members(&parsed, &[]), 1);
    // The later value keeps the later place: the last one, at the end.
    let key_at = &parsed.root().unwrap().get("k").unwrap().position;
    assert_eq!(key_at.column, text.len() - 1);

    // A known setting, repeated: one value kept, and it is validated.
    let (text, n) = fill("{\"execution\":{", "\"max_io_threads\":4", ",", "}}");
    let parsed = validate("duplicate_setting", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::DuplicateKey), n - 1);
    assert_eq!(parsed.config.execution.unwrap().max_io_threads, Some(4));
}

#[test]
fn duplicates_at_the_bottom_of_deep_nesting_with_long_keys() {
    // 250 levels (the nesting limit) of 1000-character keys, then the rest
    // of the megabyte as duplicates: every duplicate's path is 250 KB long
    // in full. Copying it into each diagnostic took 24 GB and two minutes.
    for key_len in [1000, 60] {
        let key = "k".repeat(key_len);
        let depth = 250;
        let head = format!("{}{{", format!("{{\"{key}\":").repeat(depth));
        let tail = format!("}}{}", "}".repeat(depth));
        let (text, n) = fill(&head, "\"d\":1", ",", &tail);
        let parsed = validate("deep_duplicates", text.as_bytes());
        assert!(!parsed.has_errors(), "{:?}", parsed.diagnostics.first());
        assert_eq!(count(&parsed, DiagnosticKind::DuplicateKey), n - 1);
        let d = parsed
            .diagnostics
            .iter()
            .find(|d| d.kind == DiagnosticKind::DuplicateKey)
            .unwrap();
        assert!(d.path.contains('…') && d.path.ends_with(".d"), "{}", d.path);
    }
    // Many small objects with duplicates in a deep array.
    let head = format!("{}[", "{\"a\":".repeat(250));
    let tail = format!("]{}", "}".repeat(250));
    let (text, n) = fill(&head, "{\"d\":1,\"d\":2}", ",", &tail);
    let parsed = validate("deep_objects", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::DuplicateKey), n);
}

#[test]
fn a_hundred_thousand_small_objects_and_a_long_array() {
    let (text, n) = numbered("{", |i| format!("\"k{i}\":{{}}"), "}");
    let parsed = validate("objects", text.as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::UnknownKey), n);

    let (text, n) = fill("{\"a\":[", "1", ",", "]}");
    let parsed = validate("array", text.as_bytes());
    assert_eq!(parsed.diagnostics.len(), 1);
    match &parsed.root().unwrap().get("a").unwrap().value {
        cufile_config::jsonc::Value::Array(items) => assert_eq!(items.len(), n),
        other => panic!("{other:?}"),
    }

    // Wrong values for a real setting, every one an error.
    let (text, n) = fill(
        "{\"properties\":{\"posix_pool_slab_size_kb\":[",
        "-1",
        ",",
        "]}}",
    );
    let parsed = validate("bad_values", text.as_bytes());
    assert!(parsed.has_errors());
    assert!(parsed.error_count() >= 1 && parsed.error_count() <= n + 1);
}

#[test]
fn a_key_or_a_string_of_a_megabyte() {
    let long = "a".repeat(CAP);
    let string = &long[..CAP - 10];
    let parsed = validate("long_string", format!("{{\"k\":\"{string}\"}}").as_bytes());
    assert_eq!(count(&parsed, DiagnosticKind::UnknownKey), 1);

    for (head, tail) in [("{\"", "\":1}"), ("{\"execution\":{\"", "\":1}}")] {
        let text = format!("{head}{}{tail}", &long[..CAP - head.len() - tail.len()]);
        let parsed = validate("long_key", text.as_bytes());
        let d = &parsed.diagnostics[0];
        assert_eq!(d.kind, DiagnosticKind::UnknownKey);
        assert!(d.path.len() < 2 * MAX_KEY_CHARS + 20, "{}", d.path.len());
        assert!(d.help.is_none(), "no typo search for a megabyte key");
    }

    let non_ascii = "é".repeat((CAP - 20) / 2);
    let parsed = validate("non_ascii", format!("{{\"k\":\"{non_ascii}\"}}").as_bytes());
    assert_eq!(parsed.diagnostics.len(), 1);

    let (text, _) = fill("{\"k\":\"", "\\u00e9", "", "\"}");
    let parsed = validate("escapes", text.as_bytes());
    assert_eq!(parsed.diagnostics.len(), 1);

    // Invalid UTF-8 throughout: one warning, not one per byte.
    let mut bytes = b"{\"k\":\"".to_vec();
    bytes.resize(CAP - 2, 0xff);
    bytes.extend_from_slice(b"\"}");
    let parsed = validate("invalid_utf8", &bytes);
    assert_eq!(parsed.diagnostics.len(), 2, "{:?}", parsed.diagnostics);
}

#[test]
fn comments_newlines_and_an_error_at_the_very_end() {
    for (name, item) in [("block_comments", "/*c*/"), ("line_comments", "//c\n")] {
        let (text, _) = fill("{", item, "", "}");
        let parsed = validate(name, text.as_bytes());
        assert!(parsed.diagnostics.is_empty(), "{name}");
    }
    let (text, n) = fill("{", "\n", "", "}");
    let parsed = validate("newlines", text.as_bytes());
    assert!(parsed.diagnostics.is_empty());
    assert_eq!(
        parsed.root().unwrap().position.line,
        1,
        "{n} lines, the object on the first"
    );

    let (text, _) = numbered("{", |i| format!("\"k{i}\":1"), ",}");
    let parsed = validate("trailing_comma", text.as_bytes());
    let errors: Vec<_> = parsed
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].column, text.len() - 1);
}

#[test]
fn twenty_thousand_mount_table_entries() {
    let (text, n) = numbered(
        "{\"fs\":{\"lustre\":{\"mount_table\":{",
        |i| {
            format!(
                "\"/mnt/{i}\":{{\"rdma_dev_addr_list\":[\"10.0.0.{}\"]}}",
                i % 250
            )
        },
        "}}}}",
    );
    assert!(n > 15_000, "{n}");
    let parsed = validate("mounts", text.as_bytes());
    assert!(!parsed.has_errors(), "{:?}", parsed.diagnostics.first());
    assert_eq!(
        members(&parsed, &["fs", "lustre", "mount_table"]),
        n,
        "every mount point kept"
    );
}
