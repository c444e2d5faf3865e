//! Validation: every problem in a parsed cufile.json, judged the way
//! libcufile judges it, and the typed model of what is valid.

use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::Map;

use crate::defaults::library_defaults;
use crate::diagnostic::{Diagnostic, DiagnosticKind, Position, Severity};
use crate::json_path::{self, display};
use crate::jsonc::{Member, Node, Value};
use crate::library::Libcufile;
use crate::model::CufileConfig;
use crate::schema::{self, Kind, ListRule, Setting, UIntRule};

/// How to validate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValidateOptions {
    /// The libcufile version whose keys and ranges apply (default 1.15).
    pub library: Libcufile,
    /// Also check that paths in the file (`logging.dir`, denylisted devices
    /// and mounts, mount tables) exist on this machine.
    pub check_paths: bool,
}

pub(crate) struct Validation {
    pub diagnostics: Vec<Diagnostic>,
    pub config: CufileConfig,
}

pub(crate) fn validate(root: &Node, options: &ValidateOptions) -> Validation {
    let mut walker = Walker {
        options,
        diagnostics: Vec::new(),
        typo_searches_left: TYPO_SEARCHES,
    };
    let Value::Object(members) = &root.value else {
        walker.diagnostics.push(
            Diagnostic::error(
                DiagnosticKind::NotAnObject,
                "",
                root.position,
                format!(
                    "the top-level value must be an object, not {} {}",
                    root.value.type_name(),
                    root.value.excerpt()
                ),
            )
            .with_expected("an object: { \"execution\": { … }, … }"),
        );
        return Validation {
            diagnostics: walker.diagnostics,
            config: CufileConfig::default(),
        };
    };
    let json = walker.object(members, "", false);
    let config = match serde_json::from_value(serde_json::Value::Object(json)) {
        Ok(config) => config,
        Err(e) => {
            debug_assert!(false, "the validated tree does not fit the model: {e}");
            walker.diagnostics.push(Diagnostic::error(
                DiagnosticKind::WrongType,
                "",
                root.position,
                format!("cufile-config could not build its model of this file ({e}); this is a bug in cufile-config"),
            ));
            CufileConfig::default()
        }
    };
    cross_checks(&mut walker, root, &config);
    Validation {
        diagnostics: walker.diagnostics,
        config,
    }
}

/// Checks one value for `setting` (from the environment or the API): the
/// value as the model holds it, or what is wrong with it.
pub(crate) fn check_value(
    setting: &Setting,
    value: &serde_json::Value,
    library: Libcufile,
) -> Result<serde_json::Value, String> {
    let options = ValidateOptions {
        library,
        check_paths: false,
    };
    let mut walker = Walker {
        options: &options,
        diagnostics: Vec::new(),
        typo_searches_left: 0,
    };
    let out = walker.leaf(setting, &Node::from_json(value), setting.path);
    match (out, walker.diagnostics.iter().find(|d| d.is_error())) {
        (Some(v), None) => Ok(v),
        (_, Some(d)) => Err(d.message.clone()),
        (None, None) => Err(format!("{} cannot take {value}", setting.path)),
    }
}

/// An environment variable's text as the JSON value it stands for.
pub(crate) fn env_value(kind: &Kind, text: &str) -> serde_json::Value {
    let trimmed = text.trim();
    match kind {
        Kind::Bool => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => true.into(),
            "false" | "0" | "no" | "off" => false.into(),
            _ => trimmed.into(),
        },
        Kind::UInt(_) | Kind::SizeLimitMb => trimmed
            .parse::<i64>()
            .map(serde_json::Value::from)
            .or_else(|_| trimmed.parse::<u64>().map(serde_json::Value::from))
            .unwrap_or_else(|_| trimmed.into()),
        _ => trimmed.into(),
    }
}

struct Walker<'o> {
    options: &'o ValidateOptions,
    diagnostics: Vec<Diagnostic>,
    /// How many more unknown keys get a "did you mean" search. Each search
    /// measures the key against every known key of its section; a file of a
    /// hundred thousand unknown keys would spend seconds on suggestions no
    /// one reads, so only the first [`TYPO_SEARCHES`] are searched.
    typo_searches_left: usize,
}

/// Unknown keys per file that get a "did you mean" search.
const TYPO_SEARCHES: usize = 100;

/// A JSON number, classified the way a whole-number setting reads it.
enum WholeNumber {
    Exact(u64),
    /// `4.0`, `1e3`: jsoncpp stores a double and cuFile reads it as a whole
    /// number.
    WrittenAsReal(u64),
    Negative,
    TooLarge,
    Fraction,
}

fn classify(raw: &str) -> WholeNumber {
    if !raw.contains(['.', 'e', 'E']) {
        return match raw.parse::<u64>() {
            Ok(n) => WholeNumber::Exact(n),
            Err(_) if raw.trim_start_matches('-').bytes().all(|b| b == b'0') => {
                WholeNumber::Exact(0)
            }
            Err(_) if raw.starts_with('-') => WholeNumber::Negative,
            Err(_) => WholeNumber::TooLarge,
        };
    }
    let Ok(value) = raw.parse::<f64>() else {
        return WholeNumber::Fraction;
    };
    if value.fract() != 0.0 || !value.is_finite() {
        WholeNumber::Fraction
    } else if value < 0.0 {
        WholeNumber::Negative
    } else if value >= 18_446_744_073_709_551_616.0 {
        WholeNumber::TooLarge
    } else {
        // In range and integral: the conversion is exact.
        WholeNumber::WrittenAsReal(value as u64)
    }
}

fn range_text(min: u64, max: u64) -> String {
    format!("{min}..={max}")
}

fn unit_text(multiple_of: u64) -> String {
    match multiple_of {
        4 => "4 (4 KiB, one page)".to_owned(),
        n => format!("{n} ({n} KiB)"),
    }
}

fn one_of(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("one of {}", quoted.join(", "))
}

/// The candidate closest to `word`, if it is close enough to be a typo. A
/// word longer than any key could be a typo of is not compared: the distance
/// costs the product of the lengths (a 1 MiB key against every candidate).
fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if word.chars().nth(json_path::MAX_KEY_CHARS).is_some() {
        return None;
    }
    candidates
        .into_iter()
        .map(|c| (strsim::normalized_damerau_levenshtein(word, c), c))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

impl Walker<'_> {
    fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn object(
        &mut self,
        members: &[Member],
        path: &str,
        version_noted: bool,
    ) -> Map<String, serde_json::Value> {
        let mut out = Map::new();
        for member in members {
            let child = json_path::child(path, &member.key);
            if let Some(setting) = schema::setting(&child) {
                if !version_noted {
                    self.note_version(&child, setting.read_by, member.key_position);
                }
                if let Some(value) = self.leaf(setting, &member.value, &child) {
                    out.insert(member.key.clone(), value);
                }
            } else if schema::is_section(&child) {
                let noted = version_noted || self.note_section_version(&child, member.key_position);
                match &member.value.value {
                    Value::Object(inner) => {
                        let map = self.object(inner, &child, noted);
                        out.insert(member.key.clone(), serde_json::Value::Object(map));
                    }
                    other => self.push(
                        Diagnostic::error(
                            DiagnosticKind::WrongType,
                            child.clone(),
                            member.value.position,
                            format!(
                                "{child} must be an object, not {} {}",
                                other.type_name(),
                                other.excerpt()
                            ),
                        )
                        .with_expected("an object: { … }"),
                    ),
                }
            } else {
                self.unknown_key(&child, path, &member.key, member.key_position);
                out.insert(member.key.clone(), member.value.to_json());
            }
        }
        out
    }

    fn version_message(&self, path: &str, read_by: &[Libcufile]) -> Option<String> {
        let library = self.options.library;
        if read_by.contains(&library) {
            return None;
        }
        let readers: Vec<String> = read_by.iter().map(|l| l.to_string()).collect();
        Some(format!(
            "{path} is read by {}, not by {library}, which ignores it",
            readers.join(" and ")
        ))
    }

    fn note_version(&mut self, path: &str, read_by: &[Libcufile], at: Position) {
        if let Some(message) = self.version_message(path, read_by) {
            self.push(
                Diagnostic::warning(DiagnosticKind::OtherVersion, path, at, message).with_help(
                    "validate for the other version with --library if that is what the machine runs",
                ),
            );
        }
    }

    /// Warns once for a whole section no setting of which the library reads;
    /// returns whether it did.
    fn note_section_version(&mut self, path: &str, at: Position) -> bool {
        let library = self.options.library;
        if schema::section_read_by(path, library) {
            return false;
        }
        let mut read_by: Vec<Libcufile> = schema::settings_under(path)
            .flat_map(|s| s.read_by.iter().copied())
            .collect();
        read_by.sort_unstable();
        read_by.dedup();
        self.note_version(path, &read_by, at);
        true
    }

    fn unknown_key(&mut self, path: &str, parent: &str, key: &str, at: Position) {
        let mut diagnostic = Diagnostic::warning(
            DiagnosticKind::UnknownKey,
            path,
            at,
            format!("unknown key {}: cuFile does not read it", display(path)),
        );
        let search = self.typo_searches_left > 0;
        self.typo_searches_left = self.typo_searches_left.saturating_sub(1);
        let help = if let Some((_, meant)) = schema::ALIASES.iter().find(|(a, _)| *a == path) {
            Some(format!("did you mean {meant}?"))
        } else if let Some(best) = search
            .then(|| closest(key, schema::keys_in(parent)))
            .flatten()
        {
            Some(format!("did you mean {}?", json_path::child(parent, best)))
        } else {
            schema::setting_with_key(key).map(|s| format!("{key} belongs in {}", s.path))
        };
        if let Some(help) = help {
            diagnostic = diagnostic.with_help(help);
        }
        self.push(diagnostic);
    }

    fn wrong_type(&mut self, node: &Node, path: &str, expected: &str) {
        let mut diagnostic = Diagnostic::error(
            DiagnosticKind::WrongType,
            path,
            node.position,
            format!(
                "{path} must be {expected}, not {} {}",
                node.value.type_name(),
                node.value.excerpt()
            ),
        )
        .with_expected(expected);
        if let Value::String(s) = &node.value {
            let unquoted = s.trim();
            let looks_right = match expected {
                "true or false" => unquoted == "true" || unquoted == "false",
                "a whole number" => unquoted.parse::<i64>().is_ok(),
                _ => false,
            };
            if looks_right {
                diagnostic = diagnostic.with_help(format!("remove the quotes: {unquoted}"));
            }
        }
        self.push(diagnostic);
    }

    fn leaf(&mut self, setting: &Setting, node: &Node, path: &str) -> Option<serde_json::Value> {
        match setting.kind {
            Kind::Bool => self.bool(node, path).map(Into::into),
            Kind::UInt(rule) => self.uint(node, path, &rule).map(Into::into),
            Kind::SizeLimitMb => self.size_limit(node, path).map(Into::into),
            Kind::Enum(values) => self.enum_value(node, path, values).map(Into::into),
            Kind::String => self.string(node, path).map(Into::into),
            Kind::Path { dir } => {
                let s = self.string(node, path)?;
                self.check_path(node, path, &s, dir);
                Some(s.into())
            }
            Kind::StringList => {
                self.list(node, path, |w, item, p| w.string(item, p).map(Into::into))
            }
            Kind::PathList => self.list(node, path, |w, item, p| {
                let s = w.string(item, p)?;
                w.check_path(item, p, &s, false);
                Some(s.into())
            }),
            Kind::AddressList => self.list(node, path, |w, item, p| {
                let s = w.string(item, p)?;
                w.check_address(item, p, &s);
                Some(s.into())
            }),
            Kind::UIntList(rule) => self.uint_list(node, path, &rule),
            Kind::EnumList(values) => self.list(node, path, |w, item, p| {
                w.enum_value(item, p, values).map(Into::into)
            }),
            Kind::MountTable => self.mount_table(node, path),
            Kind::Hex { bits } => {
                let s = self.string(node, path)?;
                self.check_hex(node, path, &s, bits);
                Some(s.into())
            }
            Kind::Any => Some(node.to_json()),
        }
    }

    fn bool(&mut self, node: &Node, path: &str) -> Option<bool> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.wrong_type(node, path, "true or false");
                None
            }
        }
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.wrong_type(node, path, "a string");
                None
            }
        }
    }

    /// A whole number of any size; type errors reported, range not checked.
    fn whole(&mut self, node: &Node, path: &str, min: u64, max: u64) -> Option<u64> {
        let Value::Number(raw) = &node.value else {
            self.wrong_type(node, path, "a whole number");
            return None;
        };
        let out_of_range = |w: &mut Self| {
            w.push(
                Diagnostic::error(
                    DiagnosticKind::OutOfRange,
                    path,
                    node.position,
                    format!("{path} = {raw} is out of range {}", range_text(min, max)),
                )
                .with_expected(range_text(min, max)),
            );
            None
        };
        match classify(raw) {
            WholeNumber::Exact(n) => Some(n),
            WholeNumber::WrittenAsReal(n) => {
                self.push(
                    Diagnostic::warning(
                        DiagnosticKind::WrongType,
                        path,
                        node.position,
                        format!(
                            "{path} = {raw} is written as a real number; cuFile reads it as {n}"
                        ),
                    )
                    .with_help(format!("write {n}")),
                );
                Some(n)
            }
            WholeNumber::Negative | WholeNumber::TooLarge => out_of_range(self),
            WholeNumber::Fraction => {
                self.push(
                    Diagnostic::error(
                        DiagnosticKind::WrongType,
                        path,
                        node.position,
                        format!("{path} = {raw} must be a whole number"),
                    )
                    .with_expected(range_text(min, max)),
                );
                None
            }
        }
    }

    fn uint(&mut self, node: &Node, path: &str, rule: &UIntRule) -> Option<u64> {
        let library = self.options.library;
        let max = rule.max_for(library);
        let value = self.whole(node, path, rule.min, max)?;
        if value < rule.min || value > max {
            let mut diagnostic = Diagnostic::error(
                DiagnosticKind::OutOfRange,
                path,
                node.position,
                format!(
                    "{path} = {value} is out of range {}",
                    range_text(rule.min, max)
                ),
            )
            .with_expected(range_text(rule.min, max));
            for other in Libcufile::ALL {
                let other_max = rule.max_for(other);
                if other != library && other_max != max && value <= other_max {
                    diagnostic = diagnostic.with_help(format!(
                        "{other} accepts {}",
                        range_text(rule.min, other_max)
                    ));
                }
            }
            self.push(diagnostic);
            return None;
        }
        if value % rule.multiple_of != 0 {
            self.push(
                Diagnostic::new(
                    rule.misaligned,
                    DiagnosticKind::Misaligned,
                    path,
                    node.position,
                    format!(
                        "{path} = {value} is not a multiple of {}",
                        unit_text(rule.multiple_of)
                    ),
                )
                .with_expected(format!("a multiple of {}", rule.multiple_of)),
            );
            if rule.misaligned == Severity::Error {
                return None;
            }
        }
        Some(value)
    }

    fn size_limit(&mut self, node: &Node, path: &str) -> Option<i64> {
        const EXPECTED: &str = "-1 (no limit) or 1 and more";
        let Value::Number(raw) = &node.value else {
            self.wrong_type(node, path, "a whole number");
            return None;
        };
        match raw.parse::<i64>() {
            Ok(n) if n == -1 || n >= 1 => Some(n),
            _ => {
                self.push(
                    Diagnostic::error(
                        DiagnosticKind::OutOfRange,
                        path,
                        node.position,
                        format!("{path} = {raw} is out of range: {EXPECTED}"),
                    )
                    .with_expected(EXPECTED),
                );
                None
            }
        }
    }

    fn enum_value(&mut self, node: &Node, path: &str, values: &[&'static str]) -> Option<String> {
        let Value::String(s) = &node.value else {
            self.wrong_type(node, path, &one_of(values));
            return None;
        };
        if values.contains(&s.as_str()) {
            return Some(s.clone());
        }
        if let Some(canonical) = values.iter().find(|v| v.eq_ignore_ascii_case(s)) {
            self.push(
                Diagnostic::warning(
                    DiagnosticKind::BadValue,
                    path,
                    node.position,
                    format!("{path} = \"{s}\" is not spelled the way cuFile documents it"),
                )
                .with_expected(one_of(values))
                .with_help(format!("write \"{canonical}\"")),
            );
            return Some((*canonical).to_owned());
        }
        let mut diagnostic = Diagnostic::error(
            DiagnosticKind::BadValue,
            path,
            node.position,
            format!(
                "{path} = {} is not {}",
                node.value.excerpt(),
                one_of(values)
            ),
        )
        .with_expected(one_of(values));
        if let Some(best) = closest(&s.to_ascii_uppercase(), values.iter().copied())
            .or_else(|| closest(s, values.iter().copied()))
        {
            diagnostic = diagnostic.with_help(format!("did you mean \"{best}\"?"));
        }
        self.push(diagnostic);
        None
    }

    fn list(
        &mut self,
        node: &Node,
        path: &str,
        mut item: impl FnMut(&mut Self, &Node, &str) -> Option<serde_json::Value>,
    ) -> Option<serde_json::Value> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(node, path, "an array");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut all_valid = true;
        for (i, element) in items.iter().enumerate() {
            match item(self, element, &json_path::element(path, i)) {
                Some(v) => out.push(v),
                None => all_valid = false,
            }
        }
        all_valid.then_some(serde_json::Value::Array(out))
    }

    fn uint_list(&mut self, node: &Node, path: &str, rule: &ListRule) -> Option<serde_json::Value> {
        let value = self.list(node, path, |w, item, p| {
            let n = w.whole(item, p, 1, u64::MAX)?;
            if n == 0 {
                w.push(
                    Diagnostic::new(
                        rule.severity,
                        DiagnosticKind::OutOfRange,
                        p,
                        item.position,
                        format!("{p} = 0 must be positive"),
                    )
                    .with_expected("1 or more"),
                );
                return (rule.severity == Severity::Warning).then_some(n.into());
            }
            if n % rule.multiple_of != 0 {
                w.push(
                    Diagnostic::new(
                        rule.severity,
                        DiagnosticKind::Misaligned,
                        p,
                        item.position,
                        format!(
                            "{p} = {n} is not a multiple of {}",
                            unit_text(rule.multiple_of)
                        ),
                    )
                    .with_expected(format!("a multiple of {}", rule.multiple_of)),
                );
                return (rule.severity == Severity::Warning).then_some(n.into());
            }
            Some(n.into())
        })?;
        if rule.ascending
            && let (serde_json::Value::Array(values), Value::Array(items)) = (&value, &node.value)
        {
            let numbers: Vec<u64> = values
                .iter()
                .filter_map(serde_json::Value::as_u64)
                .collect();
            if let Some(i) = (1..numbers.len()).find(|&i| numbers[i] <= numbers[i - 1]) {
                let p = json_path::element(path, i);
                self.push(
                    Diagnostic::new(
                        rule.severity,
                        DiagnosticKind::Inconsistent,
                        p.clone(),
                        items[i].position,
                        format!(
                            "{p} = {} is not larger than the size before it ({}): slab sizes must increase",
                            numbers[i],
                            numbers[i - 1]
                        ),
                    )
                    .with_expected("strictly increasing sizes"),
                );
            }
        }
        Some(value)
    }

    fn mount_table(&mut self, node: &Node, path: &str) -> Option<serde_json::Value> {
        let Value::Object(mounts) = &node.value else {
            self.wrong_type(
                node,
                path,
                "an object of mount point → { \"rdma_dev_addr_list\": [...] }",
            );
            return None;
        };
        let mut out = Map::new();
        for mount in mounts {
            let mount_path = json_path::child(path, &mount.key);
            if !mount.key.starts_with('/') {
                self.push(
                    Diagnostic::warning(
                        DiagnosticKind::BadValue,
                        mount_path.clone(),
                        mount.key_position,
                        format!(
                            "mount point \"{}\" in {path} is not an absolute path",
                            mount.key
                        ),
                    )
                    .with_expected("an absolute path such as \"/mnt/lustre\""),
                );
            } else {
                self.check_path(&mount.value, &mount_path, &mount.key, true);
            }
            let Value::Object(entry) = &mount.value.value else {
                self.wrong_type(
                    &mount.value,
                    &mount_path,
                    "an object: { \"rdma_dev_addr_list\": [...] }",
                );
                continue;
            };
            let mut fields = Map::new();
            for field in entry {
                let field_path = json_path::child(&mount_path, &field.key);
                if field.key == "rdma_dev_addr_list" {
                    let list = self.list(&field.value, &field_path, |w, item, p| {
                        let s = w.string(item, p)?;
                        w.check_address(item, p, &s);
                        Some(s.into())
                    });
                    if let Some(list) = list {
                        fields.insert(field.key.clone(), list);
                    }
                } else {
                    self.unknown_key(&field_path, &mount_path, &field.key, field.key_position);
                    fields.insert(field.key.clone(), field.value.to_json());
                }
            }
            out.insert(mount.key.clone(), serde_json::Value::Object(fields));
        }
        Some(serde_json::Value::Object(out))
    }

    fn check_address(&mut self, node: &Node, path: &str, text: &str) {
        if text.parse::<Ipv4Addr>().is_err() {
            self.push(
                Diagnostic::warning(
                    DiagnosticKind::BadValue,
                    path,
                    node.position,
                    format!("{path} = \"{text}\" is not an IPv4 address; cuFile matches no interface with it"),
                )
                .with_expected("an IPv4 address such as \"172.16.0.10\""),
            );
        }
    }

    fn check_hex(&mut self, node: &Node, path: &str, text: &str, bits: u32) {
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or("");
        let fits = !digits.is_empty()
            && u64::from_str_radix(digits, 16).is_ok_and(|v| bits >= 64 || v >> bits == 0);
        if !fits {
            self.push(
                Diagnostic::warning(
                    DiagnosticKind::BadValue,
                    path,
                    node.position,
                    format!(
                        "{path} = \"{text}\" is not a hexadecimal number of at most {bits} bits"
                    ),
                )
                .with_expected(format!("\"0x…\" below 2^{bits}")),
            );
        }
    }

    fn check_path(&mut self, node: &Node, path: &str, text: &str, dir: bool) {
        if !self.options.check_paths {
            return;
        }
        let target = Path::new(text);
        let problem = match std::fs::metadata(target) {
            Err(e) => Some(format!("does not exist here ({e})")),
            Ok(m) if dir && !m.is_dir() => Some("is not a directory".to_owned()),
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            self.push(Diagnostic::warning(
                DiagnosticKind::MissingPath,
                path,
                node.position,
                format!("{path} = \"{text}\" {problem}"),
            ));
        }
    }
}

/// Where a setting is in the file, if it is there.
fn position(root: &Node, path: &str) -> Option<Position> {
    root.lookup(path.split('.')).map(|n| n.position)
}

/// The value of a setting: the file's, else the library default. The flag
/// says whether the file set it.
fn file_or_default<T>(file: Option<T>, default: Option<T>) -> Option<(T, bool)> {
    match (file, default) {
        (Some(v), _) => Some((v, true)),
        (None, Some(v)) => Some((v, false)),
        (None, None) => None,
    }
}

fn origin(from_file: bool) -> &'static str {
    if from_file { "" } else { " (library default)" }
}

/// Rules between settings, judged on the valid values (file, else library
/// default).
fn cross_checks(w: &mut Walker<'_>, root: &Node, config: &CufileConfig) {
    let library = w.options.library;
    let defaults = library_defaults(library);
    let props = config.properties.clone().unwrap_or_default();
    let default_props = defaults.properties.clone().unwrap_or_default();
    let slab_mode = library == Libcufile::V1_20 && props.gpu_bounce_buffer_slab_config.is_some();

    // libcufile: "directIO size should be greater than or equal to
    // PerBufferCacheSize".
    let direct = file_or_default(
        props.max_direct_io_size_kb,
        default_props.max_direct_io_size_kb,
    );
    let per_buffer = file_or_default(
        props.per_buffer_cache_size_kb,
        default_props.per_buffer_cache_size_kb,
    );
    if !slab_mode
        && let (Some((d, d_file)), Some((p, p_file))) = (direct, per_buffer)
        && (d_file || p_file)
        && d < p
    {
        let at_path = if d_file {
            "properties.max_direct_io_size_kb"
        } else {
            "properties.per_buffer_cache_size_kb"
        };
        if let Some(at) = position(root, at_path) {
            w.push(
                Diagnostic::error(
                    DiagnosticKind::Inconsistent,
                    at_path,
                    at,
                    format!(
                        "properties.max_direct_io_size_kb = {d}{} is smaller than properties.per_buffer_cache_size_kb = {p}{}",
                        origin(d_file),
                        origin(p_file)
                    ),
                )
                .with_expected("max_direct_io_size_kb >= per_buffer_cache_size_kb"),
            );
        }
    }

    // NVIDIA's stock file: "ensure (max_device_cache_size_kb /
    // per_buffer_cache_size_kb) >= io_batchsize".
    let cache = file_or_default(
        props.max_device_cache_size_kb,
        default_props.max_device_cache_size_kb,
    );
    let batch = file_or_default(props.io_batchsize, default_props.io_batchsize);
    if !slab_mode
        && let (Some((c, c_file)), Some((p, p_file)), Some((b, b_file))) =
            (cache, per_buffer, batch)
        && (c_file || p_file || b_file)
        && p > 0
        && c / p < b
    {
        let at_path = [
            (c_file, "properties.max_device_cache_size_kb"),
            (p_file, "properties.per_buffer_cache_size_kb"),
            (b_file, "properties.io_batchsize"),
        ]
        .into_iter()
        .find(|(from_file, _)| *from_file)
        .map_or("properties.io_batchsize", |(_, p)| p);
        if let Some(at) = position(root, at_path) {
            w.push(
                Diagnostic::warning(
                    DiagnosticKind::Inconsistent,
                    at_path,
                    at,
                    format!(
                        "properties.max_device_cache_size_kb / properties.per_buffer_cache_size_kb = {c}{} / {p}{} = {} is less than properties.io_batchsize = {b}{}",
                        origin(c_file),
                        origin(p_file),
                        c / p,
                        origin(b_file)
                    ),
                )
                .with_expected("max_device_cache_size_kb / per_buffer_cache_size_kb >= io_batchsize")
                .with_help("a full batch needs one bounce buffer per I/O; raise max_device_cache_size_kb or lower io_batchsize"),
            );
        }
    }

    // libcufile: "posix pool slab configuration error".
    match (&props.posix_pool_slab_size_kb, &props.posix_pool_slab_count) {
        (Some(sizes), Some(counts)) if sizes.len() != counts.len() => {
            if let Some(at) = position(root, "properties.posix_pool_slab_count") {
                w.push(
                    Diagnostic::error(
                        DiagnosticKind::Inconsistent,
                        "properties.posix_pool_slab_count",
                        at,
                        format!(
                            "properties.posix_pool_slab_count has {} entries but properties.posix_pool_slab_size_kb has {}",
                            counts.len(),
                            sizes.len()
                        ),
                    )
                    .with_expected("one count per slab size"),
                );
            }
        }
        (Some(_), None) | (None, Some(_)) => {
            let (set, missing) = if props.posix_pool_slab_size_kb.is_some() {
                (
                    "properties.posix_pool_slab_size_kb",
                    "properties.posix_pool_slab_count",
                )
            } else {
                (
                    "properties.posix_pool_slab_count",
                    "properties.posix_pool_slab_size_kb",
                )
            };
            if let Some(at) = position(root, set) {
                w.push(Diagnostic::warning(
                    DiagnosticKind::Inconsistent,
                    set,
                    at,
                    format!("{set} is set without {missing}; set both, with one count per size"),
                ));
            }
        }
        _ => {}
    }

    if library == Libcufile::V1_20
        && let Some(slabs) = &props.gpu_bounce_buffer_slab_config
    {
        gpu_slab_checks(w, root, slabs, &props);
    }

    // The scheduling split: cuFile splits a request into at most
    // min(max_request_parallelism, max_io_threads) units.
    let exec = config.execution_section();
    let resolved = exec.resolve(&crate::ExecutionConfig::library_defaults(library));
    let mentioned = exec.parallel_io.is_some()
        || exec.max_io_threads.is_some()
        || exec.max_request_parallelism.is_some();
    if mentioned && resolved.parallel_io {
        for (key, value, from_file) in [
            (
                "max_io_threads",
                resolved.max_io_threads,
                exec.max_io_threads.is_some(),
            ),
            (
                "max_request_parallelism",
                resolved.max_request_parallelism,
                exec.max_request_parallelism.is_some(),
            ),
        ] {
            let path = format!("execution.{key}");
            let at = position(root, &path).or_else(|| position(root, "execution.parallel_io"));
            if value == 0
                && let Some(at) = at
            {
                w.push(
                    Diagnostic::warning(
                        DiagnosticKind::Inconsistent,
                        path.clone(),
                        at,
                        format!(
                            "execution.parallel_io is true but {path} = 0{}: cuFile splits no request",
                            origin(from_file)
                        ),
                    )
                    .with_help("set both max_io_threads and max_request_parallelism to 1 or more, or parallel_io to false"),
                );
            }
        }
    }

    // libcufile logs "rdma_dev_addr_list not set, cannot compute best gpus".
    if props.rdma_dynamic_routing == Some(true) {
        let json = config.to_json();
        let has_addresses = json_has_address_list(&json);
        if !has_addresses && let Some(at) = position(root, "properties.rdma_dynamic_routing") {
            w.push(
                Diagnostic::warning(
                    DiagnosticKind::Inconsistent,
                    "properties.rdma_dynamic_routing",
                    at,
                    "properties.rdma_dynamic_routing is true but no rdma_dev_addr_list names an interface",
                )
                .with_help("list the client IPv4 addresses in properties.rdma_dev_addr_list or in the filesystem's section"),
            );
        }
    }
}

fn json_has_address_list(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => map.iter().any(|(k, v)| {
            (k == "rdma_dev_addr_list" && v.as_array().is_some_and(|a| !a.is_empty()))
                || json_has_address_list(v)
        }),
        _ => false,
    }
}

fn gpu_slab_checks(
    w: &mut Walker<'_>,
    root: &Node,
    slabs: &crate::model::SlabConfig,
    props: &crate::model::PropertiesSection,
) {
    const SECTION: &str = "properties.gpu_bounce_buffer_slab_config";
    let Some(at) = position(root, SECTION) else {
        return;
    };
    let fallback = "cuFile falls back to the legacy bounce buffer settings";
    match (&slabs.slab_size_kb, &slabs.slab_count) {
        (None, _) => w.push(Diagnostic::warning(
            DiagnosticKind::Inconsistent,
            SECTION,
            at,
            format!("{SECTION} has no slab_size_kb; {fallback}"),
        )),
        (Some(sizes), counts) => {
            let count_len = counts.as_ref().map_or(0, Vec::len);
            if sizes.len() != count_len {
                w.push(
                    Diagnostic::warning(
                        DiagnosticKind::Inconsistent,
                        format!("{SECTION}.slab_count"),
                        position(root, &format!("{SECTION}.slab_count")).unwrap_or(at),
                        format!(
                            "{SECTION}.slab_count has {count_len} entries but slab_size_kb has {}; {fallback}",
                            sizes.len()
                        ),
                    )
                    .with_expected("one count per slab size"),
                );
            }
            if !sizes.is_empty() && sizes.iter().all(|&s| s > 16384) {
                w.push(
                    Diagnostic::warning(
                        DiagnosticKind::Inconsistent,
                        format!("{SECTION}.slab_size_kb"),
                        position(root, &format!("{SECTION}.slab_size_kb")).unwrap_or(at),
                        format!("{SECTION}.slab_size_kb has no slab of 16384 KiB or less, which nvidia-fs I/O needs"),
                    )
                    .with_expected("at least one size <= 16384"),
                );
            }
        }
    }
    for (key, set) in [
        (
            "max_direct_io_size_kb",
            props.max_direct_io_size_kb.is_some(),
        ),
        (
            "max_device_cache_size_kb",
            props.max_device_cache_size_kb.is_some(),
        ),
        (
            "per_buffer_cache_size_kb",
            props.per_buffer_cache_size_kb.is_some(),
        ),
    ] {
        let path = format!("properties.{key}");
        if set && let Some(key_at) = position(root, &path) {
            w.push(Diagnostic::warning(
                DiagnosticKind::Inconsistent,
                path.clone(),
                key_at,
                format!("{path} is ignored when {SECTION} is set (libcufile 1.20 deprecates it)"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_classified_like_jsoncpp_reads_them() {
        assert!(matches!(classify("16"), WholeNumber::Exact(16)));
        assert!(matches!(classify("-0"), WholeNumber::Exact(0)));
        assert!(matches!(classify("-1"), WholeNumber::Negative));
        assert!(matches!(
            classify("18446744073709551616"),
            WholeNumber::TooLarge
        ));
        assert!(matches!(classify("4.0"), WholeNumber::WrittenAsReal(4)));
        assert!(matches!(classify("1e3"), WholeNumber::WrittenAsReal(1000)));
        assert!(matches!(classify("4.5"), WholeNumber::Fraction));
        assert!(matches!(classify("-2.0"), WholeNumber::Negative));
        assert!(matches!(classify("1e400"), WholeNumber::Fraction));
    }

    #[test]
    fn typos_find_their_key() {
        assert_eq!(
            closest("max_io_thread", schema::keys_in("execution")),
            Some("max_io_threads")
        );
        assert_eq!(closest("zzz", schema::keys_in("execution")), None);
    }
}
