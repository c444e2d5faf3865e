//! JSON with comments, read the way libcufile reads cufile.json, keeping the
//! position of every key and value.
//!
//! libcufile embeds jsoncpp (1.8 era: no `allowTrailingCommas`, no BOM
//! skipping) with its default reader settings. So: `//` and `/* */`
//! comments are accepted; a trailing comma, single quotes, unquoted keys,
//! hexadecimal numbers, `NaN` and a byte-order mark are syntax errors; a
//! duplicate key keeps the later value; text after the top-level value is
//! ignored. The tokenizer is `jsonc-parser` with every JSON5 extension turned
//! off; this module adds what jsoncpp does differently and turns its tree
//! into [`Node`]s with line:column positions.

use std::borrow::Cow;
use std::collections::HashMap;

use jsonc_parser::ast;
use jsonc_parser::errors::ParseErrorKind;
use jsonc_parser::{CollectOptions, ParseOptions};

use crate::diagnostic::{Diagnostic, DiagnosticKind, Position};
use crate::json_path;

/// A JSON value with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub position: Position,
}

/// A JSON value. Numbers keep their text so that `4`, `4.0` and
/// `18446744073709551616` stay distinguishable.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Node>),
    /// Members in file order, duplicates already resolved (the later value
    /// wins, at the later position).
    Object(Vec<Member>),
}

/// One `"key": value` pair of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub key: String,
    pub key_position: Position,
    pub value: Node,
}

impl Value {
    /// The JSON type name, as messages say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }

    /// The value as JSON text, shortened for messages.
    pub fn excerpt(&self) -> String {
        let text = match self {
            Value::Null => "null".to_owned(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.clone(),
            Value::String(s) => serde_json::Value::String(s.clone()).to_string(),
            Value::Array(items) if items.is_empty() => "[]".to_owned(),
            Value::Array(_) => "[…]".to_owned(),
            Value::Object(members) if members.is_empty() => "{}".to_owned(),
            Value::Object(_) => "{…}".to_owned(),
        };
        const MAX: usize = 60;
        if text.chars().count() > MAX {
            let cut: String = text.chars().take(MAX).collect();
            format!("{cut}…")
        } else {
            text
        }
    }
}

impl Node {
    /// The plain JSON value, positions dropped.
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(text) => number_to_json(text),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(items) => items.iter().map(Node::to_json).collect(),
            Value::Object(members) => serde_json::Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), m.value.to_json()))
                    .collect(),
            ),
        }
    }

    /// A node for a plain JSON value (environment and API values have no
    /// place in a file: position 0:0).
    pub fn from_json(value: &serde_json::Value) -> Node {
        let value = match value {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Number(n.to_string()),
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(items) => {
                Value::Array(items.iter().map(Node::from_json).collect())
            }
            serde_json::Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Member {
                        key: k.clone(),
                        key_position: Position::default(),
                        value: Node::from_json(v),
                    })
                    .collect(),
            ),
        };
        Node {
            value,
            position: Position::default(),
        }
    }

    /// The member `key` of this object.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Object(members) => members.iter().find(|m| m.key == key).map(|m| &m.value),
            _ => None,
        }
    }

    /// The node at a path of plain keys (`["execution", "max_io_threads"]`).
    pub fn lookup<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Option<&Node> {
        keys.into_iter().try_fold(self, |node, key| node.get(key))
    }
}

fn number_to_json(text: &str) -> serde_json::Value {
    if let Ok(n) = text.parse::<u64>() {
        return n.into();
    }
    if let Ok(n) = text.parse::<i64>() {
        return n.into();
    }
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// The outcome of reading a file: its top-level value when there is one, and
/// every syntax-level problem (duplicate keys, trailing text, …).
#[derive(Debug, Clone)]
pub struct Document {
    pub root: Option<Node>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Maps byte offsets to line:column, in time independent of the line's
/// length (a 100 MB file on one line has millions of values, and counting
/// each one's column from the start of the line took hours).
#[derive(Debug, Clone)]
pub struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
    /// Every byte is a character.
    ascii: bool,
    /// For text that is not ASCII (where bytes are not characters): the
    /// number of characters before every [`CHECKPOINT`]-th byte (rounded up
    /// to a character boundary), as `(byte offset, characters before it)`.
    checkpoints: Vec<(usize, usize)>,
}

/// Bytes between two character-count checkpoints.
const CHECKPOINT: usize = 4096;

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut checkpoints = vec![(0, 0)];
        let ascii = text.is_ascii();
        if !ascii {
            let mut next = CHECKPOINT;
            for (chars, (byte, _)) in text.char_indices().enumerate() {
                if byte >= next {
                    checkpoints.push((byte, chars));
                    next = byte + CHECKPOINT;
                }
            }
        }
        LineIndex {
            text,
            line_starts,
            ascii,
            checkpoints,
        }
    }

    /// Characters before byte `offset` (a character boundary).
    fn chars_before(&self, offset: usize) -> usize {
        if self.ascii {
            return offset;
        }
        let k = self
            .checkpoints
            .partition_point(|&(byte, _)| byte <= offset)
            - 1;
        let (byte, chars) = self.checkpoints[k];
        chars + self.text[byte..offset].chars().count()
    }

    /// The position of byte `offset`; offsets past the end or inside a
    /// character are clamped, never a panic.
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let column = self.chars_before(offset) - self.chars_before(start) + 1;
        Position { line, column }
    }
}

/// Reads cufile.json bytes. Invalid UTF-8 is replaced (jsoncpp does not check
/// encodings, so this is a warning, not an error).
pub fn parse_bytes(bytes: &[u8]) -> Document {
    match String::from_utf8_lossy(bytes) {
        Cow::Borrowed(text) => parse(text),
        Cow::Owned(text) => {
            let valid_up_to = std::str::from_utf8(bytes)
                .err()
                .map_or(0, |e| e.valid_up_to());
            let at = LineIndex::new(&text).position(valid_up_to);
            let mut document = parse(&text);
            document.diagnostics.push(
                Diagnostic::warning(
                    DiagnosticKind::Syntax,
                    "",
                    at,
                    "the file is not valid UTF-8 (invalid bytes are shown as U+FFFD)",
                )
                .with_help("keep cufile.json in UTF-8 or plain ASCII"),
            );
            crate::diagnostic::sort(&mut document.diagnostics);
            document
        }
    }
}

/// Reads cufile.json text.
pub fn parse(text: &str) -> Document {
    let lines = LineIndex::new(text);
    let mut diagnostics = Vec::new();

    // jsoncpp of this age does not skip a byte-order mark: cuFile reports a
    // syntax error at the first character. Report it, then read on to find
    // the other problems too.
    let skip = if text.starts_with('\u{feff}') {
        diagnostics.push(
            Diagnostic::error(
                DiagnosticKind::Syntax,
                "",
                Position { line: 1, column: 1 },
                "the file starts with a UTF-8 byte-order mark, which libcufile's JSON reader rejects",
            )
            .with_help("save the file without a BOM"),
        );
        '\u{feff}'.len_utf8()
    } else {
        0
    };

    let root = match parse_ast(&text[skip..]) {
        Ok(Some(value)) => Some(value),
        Ok(None) => {
            diagnostics.push(
                Diagnostic::error(
                    DiagnosticKind::Syntax,
                    "",
                    lines.position(text.len()),
                    "the file has no JSON value (it is empty or only comments)",
                )
                .with_expected("an object: { … }"),
            );
            None
        }
        Err(error) if matches!(error.kind(), ParseErrorKind::MultipleRootJsonValues) => {
            // jsoncpp stops after the first value and ignores the rest.
            let end = error.range().start;
            diagnostics.push(
                Diagnostic::warning(
                    DiagnosticKind::TrailingContent,
                    "",
                    lines.position(skip + end),
                    "text after the top-level value is ignored by libcufile's JSON reader",
                )
                .with_help("remove it: it is probably a stray brace or a pasted fragment"),
            );
            text.get(skip..skip + end)
                .and_then(|first| parse_ast(first).ok().flatten())
        }
        Err(error) => {
            let range = error.range();
            diagnostics.push(Diagnostic::error(
                DiagnosticKind::Syntax,
                "",
                lines.position(skip + range.start),
                syntax_message(error.kind()),
            ));
            None
        }
    };

    let root = root.map(|value| {
        let mut converter = Converter {
            lines: &lines,
            base: skip,
            diagnostics: &mut diagnostics,
            path: String::new(),
        };
        converter.node(value)
    });
    crate::diagnostic::sort(&mut diagnostics);
    Document { root, diagnostics }
}

fn parse_ast(text: &str) -> Result<Option<ast::Value<'_>>, jsonc_parser::errors::ParseError> {
    let options = ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &options).map(|r| r.value)
}

/// The syntax error in the words of a JSON user, with jsoncpp's view where it
/// differs from common JSONC tools.
fn syntax_message(kind: &ParseErrorKind) -> String {
    match kind {
        ParseErrorKind::TrailingCommasNotAllowed => {
            "trailing comma: libcufile's JSON reader (jsoncpp) rejects a comma before `}` or `]`"
                .to_owned()
        }
        ParseErrorKind::UnterminatedObject => {
            "unbalanced braces: an object is not closed with `}`".to_owned()
        }
        ParseErrorKind::UnterminatedArray => {
            "unbalanced brackets: an array is not closed with `]`".to_owned()
        }
        ParseErrorKind::ExpectedComma => "missing comma between two members or elements".to_owned(),
        ParseErrorKind::SingleQuotedStringsNotAllowed => {
            "single-quoted string: JSON strings use double quotes".to_owned()
        }
        ParseErrorKind::ExpectedStringObjectProperty | ParseErrorKind::UnexpectedWord => {
            "expected a double-quoted key or value (unquoted words are not JSON)".to_owned()
        }
        ParseErrorKind::NestingDepthExceeded => "values nested more than 512 deep".to_owned(),
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => "syntax error".to_owned(),
            }
        }
    }
}

struct Converter<'t, 'd> {
    lines: &'t LineIndex<'t>,
    /// Bytes skipped before the text given to the parser (a BOM).
    base: usize,
    diagnostics: &'d mut Vec<Diagnostic>,
    /// The path of the value being converted, grown and cut back as the
    /// walk goes down and up: one path for the whole walk, so that a value
    /// costs its own key, not its depth (a path is copied, cut to a bounded
    /// length, only into a diagnostic).
    path: String,
}

impl Converter<'_, '_> {
    fn position(&self, offset: usize) -> Position {
        self.lines.position(self.base + offset)
    }

    fn node(&mut self, value: ast::Value<'_>) -> Node {
        let (position, value) = match value {
            ast::Value::NullKeyword(n) => (self.position(n.range.start), Value::Null),
            ast::Value::BooleanLit(b) => (self.position(b.range.start), Value::Bool(b.value)),
            ast::Value::NumberLit(n) => (
                self.position(n.range.start),
                Value::Number(n.value.to_owned()),
            ),
            ast::Value::StringLit(s) => (
                self.position(s.range.start),
                Value::String(s.value.into_owned()),
            ),
            ast::Value::Array(a) => {
                let position = self.position(a.range.start);
                let parent = self.path.len();
                let items = a
                    .elements
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        json_path::push_element(&mut self.path, i);
                        let node = self.node(v);
                        self.path.truncate(parent);
                        node
                    })
                    .collect();
                (position, Value::Array(items))
            }
            ast::Value::Object(o) => {
                let position = self.position(o.range.start);
                (position, Value::Object(self.members(o.properties)))
            }
        };
        Node { value, position }
    }

    /// The members of an object, duplicates resolved as jsoncpp resolves
    /// them: the later value wins and takes the later place. Linear in the
    /// number of members: an index from key to slot finds an earlier
    /// duplicate, whose slot is emptied rather than removed.
    fn members(&mut self, properties: Vec<ast::ObjectProp<'_>>) -> Vec<Member> {
        let parent = self.path.len();
        let mut slots: Vec<Option<Member>> = Vec::with_capacity(properties.len());
        let mut index: HashMap<String, usize> = HashMap::with_capacity(properties.len());
        for property in properties {
            let (key, key_start) = match property.name {
                ast::ObjectPropName::String(s) => (s.value.into_owned(), s.range.start),
                ast::ObjectPropName::Word(w) => (w.value.to_owned(), w.range.start),
            };
            let key_position = self.position(key_start);
            json_path::push_key(&mut self.path, &key);
            let value = self.node(property.value);
            if let Some(earlier) = index.insert(key.clone(), slots.len())
                && let Some(replaced) = slots[earlier].take()
            {
                let child = json_path::abbreviate(&self.path);
                self.diagnostics.push(
                    Diagnostic::warning(
                        DiagnosticKind::DuplicateKey,
                        child.clone(),
                        key_position,
                        format!(
                            "duplicate key `{}`: cuFile uses this value ({}) and ignores the one at {}",
                            json_path::display(&child),
                            value.value.excerpt(),
                            replaced.key_position
                        ),
                    )
                    .with_help("delete one of the two"),
                );
            }
            self.path.truncate(parent);
            slots.push(Some(Member {
                key,
                key_position,
                value,
            }));
        }
        slots.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<(String, Position)> {
        parse(text)
            .diagnostics
            .into_iter()
            .map(|d| (d.message.clone(), d.position()))
            .collect()
    }

    #[test]
    fn comments_of_both_kinds_are_accepted_and_positions_count_characters() {
        let text = "{\n\t// a comment\n\t/* block\n */ \"a\": {\"é\": 1, \"b\": [true, null]}\n}";
        let doc = parse(text);
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let root = doc.root.unwrap();
        let b = root.lookup(["a", "b"]).unwrap();
        assert_eq!(
            b.position,
            Position {
                line: 4,
                column: 24
            }
        );
        let a = root.get("a").unwrap();
        assert_eq!(
            a.position,
            Position {
                line: 4,
                column: 10
            }
        );
        assert_eq!(
            root.to_json(),
            serde_json::json!({"a": {"é": 1, "b": [true, null]}})
        );
    }

    #[test]
    fn a_trailing_comma_is_an_error_at_the_comma() {
        let found = errors("{\n  \"a\": 1,\n}");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].0.contains("trailing comma"), "{found:?}");
        assert_eq!(found[0].1, Position { line: 2, column: 9 });
        assert_eq!(errors("[1, 2,]").len(), 1);
    }

    #[test]
    fn a_duplicate_key_keeps_the_later_value_and_warns() {
        let doc = parse("{\"x\": {\"a\": 1,\n \"a\": 2}}");
        let root = doc.root.unwrap();
        assert_eq!(
            root.lookup(["x", "a"]).unwrap().value,
            Value::Number("2".into())
        );
        assert_eq!(doc.diagnostics.len(), 1);
        let d = &doc.diagnostics[0];
        assert_eq!(d.kind, DiagnosticKind::DuplicateKey);
        assert_eq!(d.path, "x.a");
        assert_eq!(d.position(), Position { line: 2, column: 2 });
        assert!(d.message.contains("1:8"), "{}", d.message);
    }

    #[test]
    fn text_after_the_top_level_value_is_ignored_with_a_warning() {
        let doc = parse("{\"a\": 1}\n}");
        assert_eq!(doc.root.unwrap().to_json(), serde_json::json!({"a": 1}));
        assert_eq!(doc.diagnostics[0].kind, DiagnosticKind::TrailingContent);
        assert_eq!(
            doc.diagnostics[0].position(),
            Position { line: 2, column: 1 }
        );
    }

    #[test]
    fn json5_extensions_and_a_bom_are_errors() {
        for text in [
            "{'a': 1}",
            "{a: 1}",
            "{\"a\": 0x10}",
            "{\"a\": +1}",
            "{\"a\": .5}",
            "{\"a\": NaN}",
            "{\"a\": 1 \"b\": 2}",
            "{\"a\": \"\\x41\"}",
            "{\"a\": 1",
            "",
            "// only a comment",
            "/* unterminated",
        ] {
            let doc = parse(text);
            assert!(
                doc.diagnostics.iter().any(Diagnostic::is_error),
                "{text:?} was accepted"
            );
        }
        let doc = parse("\u{feff}{\"a\": 1}");
        assert_eq!(doc.diagnostics.len(), 1);
        assert!(doc.diagnostics[0].message.contains("byte-order mark"));
        assert_eq!(doc.root.unwrap().to_json(), serde_json::json!({"a": 1}));
    }

    #[test]
    fn invalid_utf8_is_a_warning_with_its_position() {
        let doc = parse_bytes(b"{\n \"dir\": \"/tmp/\xff\"}");
        assert_eq!(doc.diagnostics.len(), 1, "{:?}", doc.diagnostics);
        assert_eq!(doc.diagnostics[0].severity, crate::Severity::Warning);
        assert_eq!(doc.diagnostics[0].line, 2);
        assert!(doc.root.is_some());
    }

    #[test]
    fn line_index_never_panics_on_odd_offsets() {
        let lines = LineIndex::new("aé\nb");
        assert_eq!(lines.position(0), Position { line: 1, column: 1 });
        assert_eq!(lines.position(2), Position { line: 1, column: 2 });
        assert_eq!(lines.position(4), Position { line: 2, column: 1 });
        assert_eq!(lines.position(99), Position { line: 2, column: 2 });
    }

    #[test]
    fn columns_count_characters_across_checkpoints() {
        // Long lines of multi-byte characters: every column is the one a
        // character-by-character count gives.
        let line = "é€a𝄞".repeat(3000);
        let text = format!("x\n{line}\n{line}");
        let lines = LineIndex::new(&text);
        assert!(lines.checkpoints.len() > 10);
        let second = 2;
        for (i, (byte, ch)) in line.char_indices().enumerate() {
            let at = lines.position(second + byte);
            assert_eq!(
                at,
                Position {
                    line: 2,
                    column: i + 1
                },
                "byte {byte}"
            );
            // Inside a character: clamped to its start.
            if ch.len_utf8() > 1 {
                assert_eq!(lines.position(second + byte + 1), at);
            }
        }
        let third = second + line.len() + 1;
        assert_eq!(lines.position(third + 5), Position { line: 3, column: 3 });
    }
}
