//! JSON paths as diagnostics and the effective configuration name values:
//! `execution.max_io_threads`, `properties.posix_pool_slab_size_kb[1]`,
//! `fs.lustre.mount_table["/mnt/a"].rdma_dev_addr_list`.

/// The longest key a path spells out whole, in characters; a longer one (no
/// key libcufile reads is longer than 40) is shown by its start and its
/// length, so that one path never costs more than the key's first
/// characters, whatever the file holds.
pub const MAX_KEY_CHARS: usize = 64;

/// The most bytes [`abbreviate`] keeps of a path (plus the `…`).
pub const MAX_PATH_BYTES: usize = 256;

/// The path of `key` inside the object at `parent` (`""` is the document).
pub fn child(parent: &str, key: &str) -> String {
    let mut path = parent.to_owned();
    push_key(&mut path, key);
    path
}

/// Appends `key` to the path in `path` (`""` is the document): `.key`, or
/// `["key"]` for keys with dots, slashes or spaces (mount points), with a key
/// longer than [`MAX_KEY_CHARS`] cut (`["aaa…" (1048576 bytes)]`). Costs at
/// most the first [`MAX_KEY_CHARS`] characters of `key`, however long it is.
pub fn push_key(path: &mut String, key: &str) {
    let mut chars = key.char_indices();
    let cut = chars.nth(MAX_KEY_CHARS).map(|(at, _)| at);
    let shown = &key[..cut.unwrap_or(key.len())];
    let plain = !key.is_empty()
        && cut.is_none()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        return;
    }
    path.push('[');
    path.push_str(&serde_json::Value::String(shown.to_owned()).to_string());
    if cut.is_some() {
        path.push_str(&format!("… ({} bytes)", key.len()));
    }
    path.push(']');
}

/// The path of element `index` of the array at `parent`.
pub fn element(parent: &str, index: usize) -> String {
    let mut path = parent.to_owned();
    push_element(&mut path, index);
    path
}

/// Appends `[index]` to the path in `path`.
pub fn push_element(path: &mut String, index: usize) {
    use std::fmt::Write as _;
    let _ = write!(path, "[{index}]");
}

/// `path` as a diagnostic carries it: whole when at most
/// [`MAX_PATH_BYTES`] bytes, else its start and its end around `…` (a value
/// nested hundreds of levels deep). Costs at most [`MAX_PATH_BYTES`] bytes
/// whatever the path's length.
pub fn abbreviate(path: &str) -> String {
    if path.len() <= MAX_PATH_BYTES {
        return path.to_owned();
    }
    let half = MAX_PATH_BYTES / 2;
    let mut head = half;
    while !path.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = path.len() - half;
    while !path.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}…{}", &path[..head], &path[tail..])
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

    #[test]
    fn long_keys_and_deep_paths_are_cut_to_a_bounded_length() {
        let key = "k".repeat(1 << 20);
        let path = child("execution", &key);
        assert!(path.starts_with(&format!("execution[\"{}", "k".repeat(MAX_KEY_CHARS))));
        assert!(path.ends_with("\"… (1048576 bytes)]"), "{path}");
        assert!(path.len() < 2 * MAX_KEY_CHARS, "{}", path.len());

        let mut deep = String::new();
        for i in 0..500 {
            push_key(&mut deep, "level");
            push_element(&mut deep, i);
        }
        let short = abbreviate(&deep);
        assert!(short.len() <= MAX_PATH_BYTES + '…'.len_utf8(), "{short}");
        assert!(short.starts_with("level[0].level[1]"), "{short}");
        assert!(short.ends_with("level[499]"), "{short}");
        assert_eq!(
            abbreviate("execution.max_io_threads"),
            "execution.max_io_threads"
        );
    }
}
