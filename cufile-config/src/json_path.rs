//! JSON paths as diagnostics and the effective configuration name values:
//! `execution.max_io_threads`, `properties.posix_pool_slab_size_kb[1]`,
//! `fs.lustre.mount_table["/mnt/a"].rdma_dev_addr_list`.

/// The path of `key` inside the object at `parent` (`""` is the document).
pub fn child(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (parent.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{parent}.{key}"),
        // Keys with dots, slashes or spaces (mount points) are quoted.
        (_, false) => format!("{parent}[{}]", serde_json::Value::String(key.to_owned())),
    }
}

/// The path of element `index` of the array at `parent`.
pub fn element(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// The path as shown to people: the document itself has no key.
pub fn display(path: &str) -> &str {
    if path.is_empty() { "(document)" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_join_with_dots_and_others_are_quoted() {
        assert_eq!(child("", "execution"), "execution");
        assert_eq!(
            child("execution", "max_io_threads"),
            "execution.max_io_threads"
        );
        assert_eq!(
            child("fs.lustre.mount_table", "/mnt/a b"),
            r#"fs.lustre.mount_table["/mnt/a b"]"#
        );
        assert_eq!(child("", ""), r#"[""]"#);
        assert_eq!(element("denylist.mounts", 2), "denylist.mounts[2]");
    }
}
