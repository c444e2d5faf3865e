//! The stack's dependency rule: crates depend only on crates below them
//! (kvik-cli → kvik-remote → kvik-policy; kvik-python → kvik-policy;
//! kvik-policy → gds-core → cufile-sys, cufile-config), so a user who
//! validates configs builds no FFI and one who needs raw cuFile gets no
//! thread pool. The test helpers (`kvik-test-support`) are a dev-dependency
//! only: no library or binary a user builds contains them.

use std::collections::BTreeMap;
use std::process::Command;

/// Each crate and the workspace crates it may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("cufile-sys", &[]),
    ("cufile-config", &[]),
    ("gds-core", &["cufile-sys", "cufile-config"]),
    ("kvik-policy", &["gds-core", "cufile-sys", "cufile-config"]),
    (
        "kvik-remote",
        &["kvik-policy", "gds-core", "cufile-sys", "cufile-config"],
    ),
    (
        "kvik-cli",
        &[
            "kvik-remote",
            "kvik-policy",
            "gds-core",
            "cufile-sys",
            "cufile-config",
        ],
    ),
    (
        "kvik-python",
        &["kvik-policy", "gds-core", "cufile-sys", "cufile-config"],
    ),
    ("xtask", &["cufile-config"]),
    (
        "kvik-tests",
        &["kvik-policy", "gds-core", "cufile-sys", "cufile-config"],
    ),
    ("kvik-test-support", &["gds-core", "cufile-sys"]),
];

/// The test helpers: a dev-dependency only, never published.
const TEST_SUPPORT: &str = "kvik-test-support";

#[test]
fn dependencies_point_down_the_stack() {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let members: BTreeMap<&str, &serde_json::Value> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p))
        .collect();
    let ours: Vec<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        members.keys().copied().collect::<Vec<_>>().len(),
        ours.len(),
        "members: {:?}",
        members.keys()
    );

    for (name, allowed) in ALLOWED {
        let package = members
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not a workspace member"));
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let is_normal = dep["kind"].is_null();
            if is_normal && ours.contains(&dep_name) {
                assert!(
                    allowed.contains(&dep_name),
                    "{name} must not depend on {dep_name}"
                );
            }
        }
    }
    // The test helpers reach no user: only dev-dependencies name them, and
    // they are never published.
    for (name, package) in &members {
        for dep in package["dependencies"].as_array().unwrap() {
            if dep["name"] == TEST_SUPPORT {
                assert_eq!(
                    dep["kind"], "dev",
                    "{name} depends on {TEST_SUPPORT} outside its tests"
                );
            }
        }
    }
    assert_eq!(
        members[TEST_SUPPORT]["publish"],
        serde_json::json!([]),
        "{TEST_SUPPORT} must have publish = false"
    );

    // Reading local files builds no HTTP stack: tokio, object_store and
    // TLS come in only with kvik-remote.
    for name in ["kvik-policy", "gds-core", "cufile-config", "cufile-sys"] {
        for dep in members[name]["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            assert!(
                !["tokio", "object_store", "reqwest", "hyper", "rustls"].contains(&dep_name),
                "{name} depends on {dep_name}"
            );
        }
    }
    // cufile-config stays free of FFI: no libloading, no libc, no cufile-sys.
    let config = members["cufile-config"];
    for dep in config["dependencies"].as_array().unwrap() {
        let dep_name = dep["name"].as_str().unwrap();
        assert!(
            !["libloading", "cufile-sys", "bindgen"].contains(&dep_name),
            "cufile-config depends on {dep_name}"
        );
    }
}
