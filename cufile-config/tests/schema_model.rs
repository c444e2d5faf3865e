//! The schema (every key libcufile reads) and the typed model agree: each
//! key lands in a typed field of its section, or — for keys whose type is not
//! modelled — in the section's `other` map without an unknown-key warning.

use cufile_config::schema::{Kind, SETTINGS, Setting};
use cufile_config::{DiagnosticKind, Libcufile, ParsedConfig, ValidateOptions};
use serde_json::{Value, json};

/// A value cuFile accepts for the setting.
fn sample(setting: &Setting) -> Value {
    match setting.kind {
        Kind::Bool => json!(true),
        Kind::UInt(rule) => {
            let value = rule.min.max(1).div_ceil(rule.multiple_of) * rule.multiple_of;
            assert!(value <= rule.max, "{}", setting.path);
            json!(value)
        }
        Kind::SizeLimitMb => json!(64),
        Kind::Enum(values) => json!(values[0]),
        Kind::String => json!("text"),
        Kind::Path { .. } => json!("/tmp"),
        Kind::StringList | Kind::PathList => json!(["/tmp"]),
        Kind::AddressList => json!(["10.0.0.1"]),
        Kind::UIntList(_) => json!([4, 8]),
        Kind::EnumList(values) => json!([values[0]]),
        Kind::MountTable => json!({"/mnt/a": {"rdma_dev_addr_list": ["10.0.0.2"]}}),
        Kind::Hex { .. } => json!("0x1f"),
        Kind::Any => json!(1),
        _ => panic!("no sample for {:?}", setting.kind),
    }
}

fn insert(tree: &mut Value, path: &str, value: Value) {
    let mut node = tree;
    let keys: Vec<&str> = path.split('.').collect();
    for key in &keys[..keys.len() - 1] {
        node = node
            .as_object_mut()
            .unwrap()
            .entry(*key)
            .or_insert_with(|| json!({}));
    }
    node.as_object_mut()
        .unwrap()
        .insert(keys[keys.len() - 1].to_owned(), value);
}

/// Every `other` map in the model's JSON, by path.
fn others(model: &cufile_config::CufileConfig) -> Vec<String> {
    // Keys in `other` serialize next to the typed fields; find them by
    // comparing against the schema.
    let mut found = Vec::new();
    fn walk(value: &Value, path: &str, found: &mut Vec<String>) {
        let Value::Object(map) = value else { return };
        for (key, child) in map {
            let child_path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            if let Some(setting) = cufile_config::schema::setting(&child_path) {
                if setting.kind == Kind::Any {
                    found.push(child_path);
                }
            } else if cufile_config::schema::is_section(&child_path) {
                walk(child, &child_path, found);
            } else {
                found.push(format!("unexpected {child_path}"));
            }
        }
    }
    walk(&model.to_json(), "", &mut found);
    found
}

#[test]
fn every_setting_has_a_home_in_the_model() {
    for library in Libcufile::ALL {
        let mut tree = json!({});
        let mut any_paths = Vec::new();
        for setting in SETTINGS.iter().filter(|s| s.read_by(library)) {
            insert(&mut tree, setting.path, sample(setting));
            if setting.kind == Kind::Any {
                any_paths.push(setting.path.to_owned());
            }
        }
        let text = serde_json::to_string_pretty(&tree).unwrap();
        let parsed = ParsedConfig::parse_with(
            &text,
            &ValidateOptions {
                library,
                check_paths: false,
            },
        );
        let problems: Vec<_> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.is_error() || d.kind == DiagnosticKind::UnknownKey)
            .collect();
        assert!(problems.is_empty(), "{library}: {problems:#?}");
        // Everything came through, and only untyped keys sit in `other`.
        assert_eq!(parsed.config.to_json(), tree, "{library}");
        let mut in_other = others(&parsed.config);
        in_other.sort();
        any_paths.sort();
        assert_eq!(in_other, any_paths, "{library}");
    }
}

#[test]
fn keys_of_the_other_version_are_warned_about_not_dropped() {
    let parsed = ParsedConfig::parse(r#"{"block": {"nvme": {"use_pci_p2pdma": true}}}"#);
    assert_eq!(parsed.diagnostics.len(), 1, "{:#?}", parsed.diagnostics);
    assert_eq!(parsed.diagnostics[0].kind, DiagnosticKind::OtherVersion);
    assert_eq!(parsed.diagnostics[0].path, "block");
    let block = parsed.config.block.unwrap();
    assert_eq!(block.nvme.unwrap().use_pci_p2pdma, Some(true));
}
