//! `kvik write` and `kvik copy` destinations: what each kind of DST
//! becomes, that a temporary file cannot be redirected, what a replaced
//! file keeps, long names, JSON of any path, and reports that cannot be
//! written. (Issue 11, items 2–5 and 7, and their neighbours.)

mod common;

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{fails, json, kvik, kvik_cmd, names, ok, output_within, p, skip, temporaries, text};

/// Make a device node; `None` (with the reason) where this machine does
/// not let us.
fn mknod(path: &Path, kind: &str, major: u32, minor: u32) -> Option<()> {
    let out = Command::new("mknod")
        .args([p(path), kind, &major.to_string(), &minor.to_string()])
        .stderr(Stdio::piped())
        .output()
        .ok()?;
    if out.status.success() {
        Some(())
    } else {
        skip("mknod", text(&out.stderr).trim());
        None
    }
}

#[test]
fn a_character_device_dst_is_written_into_in_place_and_stays_a_device() {
    // A private node of /dev/null (1, 3) and /dev/full (1, 7): a regression
    // replaces these, not the machine's own.
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    let full = dir.path().join("full");
    if mknod(&null, "c", 1, 3).is_none() || mknod(&full, "c", 1, 7).is_none() {
        return skip("a_character_device_dst", "cannot make device nodes here");
    }
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "1MiB"]));
    let is_device = |path: &Path, minor| {
        let meta = std::fs::symlink_metadata(path).unwrap();
        meta.file_type().is_char_device() && meta.rdev() == libc::makedev(1, minor)
    };
    ok(&kvik(&["write", p(&null), "--size", "3MiB"]));
    assert!(is_device(&null, 3), "the null node was replaced");
    let w = json(&kvik(&["write", p(&null), "--size", "3MiB", "--json"]));
    assert_eq!(w["committed"]["destination"], "device");
    assert_eq!(w["committed"]["durability"], "in_place");
    assert_eq!(w["bytes"], 3 << 20);
    let c = json(&kvik(&["copy", p(&src), p(&null), "--json"]));
    assert_eq!(c["bytes"], 1 << 20);
    assert!(is_device(&null, 3), "the null node was replaced");
    // /dev/full takes no byte: the write fails, and says the device may
    // have been written in place.
    let out = kvik(&["write", p(&full), "--size", "1MiB"]);
    fails(
        &out,
        1,
        &["No space left on device", "device written in place"],
    );
    assert!(is_device(&full, 7), "the full node was replaced");
    assert_eq!(names(dir.path()), ["full", "null", "src.bin"]);
}

#[test]
fn fifo_socket_and_block_device_dsts_are_refused_and_left_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "64KiB"]));

    // A FIFO with a reader waiting on it: refused, never opened (the open
    // would wait; the reader is released by the test).
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    for args in [
        vec!["write", p(&fifo), "--size", "4KiB"],
        vec!["copy", p(&src), p(&fifo)],
    ] {
        let out = output_within(&mut kvik_cmd(&args), None);
        fails(&out, 2, &["is a FIFO"]);
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }
    drop(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
    assert!(
        reader.join().unwrap().is_empty(),
        "kvik wrote into the FIFO"
    );

    let socket_path = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    let out = output_within(
        &mut kvik_cmd(&["write", p(&socket_path), "--size", "4KiB"]),
        None,
    );
    fails(&out, 2, &["is a socket"]);
    assert!(
        std::fs::symlink_metadata(&socket_path)
            .unwrap()
            .file_type()
            .is_socket()
    );

    // A block device node of a number no driver has (major 240, reserved
    // for local use): a regression cannot reach a real disk.
    let block = dir.path().join("block");
    if mknod(&block, "b", 240, 0).is_some() {
        let out = output_within(&mut kvik_cmd(&["copy", p(&src), p(&block)]), None);
        fails(&out, 2, &["is a block device"]);
        assert!(
            std::fs::symlink_metadata(&block)
                .unwrap()
                .file_type()
                .is_block_device()
        );
    }
}

/// `kvik ARGS`, started but held before `exec` until [`release`]: its
/// process ID is known before it runs, so a test can plant files at the
/// names derived from it.
fn held_kvik(args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("read _ && exec \"$0\" \"$@\"")
        .arg(common::KVIK)
        .args(args);
    common::clean_env(&mut cmd);
    cmd.envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn release(mut child: std::process::Child) -> std::process::Output {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_planted_symlink_at_any_predictable_name_cannot_redirect_the_write() {
    // Another user who can write to the directory plants a symlink at
    // every name the command will use that can be told in advance; the
    // command (run by root, say) must not write through any of them.
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    let precious = b"precious, not to be overwritten".to_vec();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "256KiB"]));
    let dst = dir.path().join("dst.bin");

    for env in [vec![], vec![("KVIK_NO_TMPFILE", "1")]] {
        for args in [
            vec!["write", p(&dst), "--size", "256KiB", "--seed", "7"],
            vec!["copy", p(&src), p(&dst)],
            vec!["demo", "--dir", p(dir.path()), "--size", "1MiB", "--host"],
        ] {
            std::fs::write(&victim, &precious).unwrap();
            let child = held_kvik(&args, &env);
            let pid = child.id();
            let planted = [
                dir.path().join(format!(".dst.bin.kvik-{pid}.tmp")),
                dir.path().join(format!("kvik-demo-{pid}.bin")),
            ];
            for name in &planted {
                std::os::unix::fs::symlink(&victim, name).unwrap();
            }
            let out = release(child);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{args:?}: {}",
                text(&out.stderr)
            );
            assert_eq!(
                std::fs::read(&victim).unwrap(),
                precious,
                "{args:?} {env:?} wrote through a planted symlink"
            );
            if args[0] != "demo" {
                assert!(std::fs::symlink_metadata(&dst).unwrap().is_file());
            }
            for name in &planted {
                let _ = std::fs::remove_file(name);
            }
            assert!(
                temporaries(dir.path()).is_empty(),
                "{:?}",
                names(dir.path())
            );
        }
    }
}

/// Run `kvik` as uid/gid 65534 (`nobody`), from root (std drops the
/// supplementary groups with the uid).
fn as_nobody(args: &[&str]) -> Option<std::process::Output> {
    match kvik_cmd(args).uid(65534).gid(65534).output() {
        Ok(out) => Some(out),
        Err(e) => {
            skip("as_nobody", &e.to_string());
            None
        }
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn a_replaced_file_keeps_its_mode_owner_group_and_extended_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&[
        "write",
        p(&src),
        "--size",
        "128KiB",
        "--seed",
        "1",
    ]));
    let dst = dir.path().join("secret.bin");
    ok(&kvik(&["write", p(&dst), "--size", "4KiB", "--seed", "2"]));
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o600)).unwrap();
    let attribute = rustix::fs::setxattr(
        &dst,
        "user.kvik-test",
        b"kept",
        rustix::fs::XattrFlags::empty(),
    );
    if let Err(e) = &attribute {
        skip("extended attributes", &format!("setxattr: {e}"));
    }
    let other_owner = is_root() && std::os::unix::fs::chown(&dst, Some(65534), Some(65534)).is_ok();
    if !other_owner {
        skip(
            "a_replaced_file_keeps_its_owner",
            "not root: cannot give a file to uid 65534",
        );
    }

    for args in [
        vec!["write", p(&dst), "--size", "64KiB", "--seed", "3"],
        vec!["copy", p(&src), p(&dst)],
    ] {
        let out = kvik(&args);
        ok(&out);
        assert!(
            !text(&out.stderr).contains("not kept"),
            "{}",
            text(&out.stderr)
        );
        let meta = std::fs::metadata(&dst).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o600, "{args:?}: the mode changed");
        if other_owner {
            assert_eq!(
                (meta.uid(), meta.gid()),
                (65534, 65534),
                "{args:?}: owner changed"
            );
        }
        if attribute.is_ok() {
            let mut value = [0u8; 16];
            let n = rustix::fs::getxattr(&dst, "user.kvik-test", &mut value[..]).unwrap();
            assert_eq!(&value[..n], b"kept");
        }
    }
    assert!(std::fs::read(&dst).unwrap() == std::fs::read(&src).unwrap());
    let w = json(&kvik(&["write", p(&dst), "--size", "4KiB", "--json"]));
    assert_eq!(w["committed"]["destination"], "replaced");
    assert_eq!(w["committed"]["mode"], "0600");

    // An access ACL (user 65534 may read and write) is kept as it was.
    let shared = dir.path().join("shared.bin");
    std::fs::write(&shared, b"old").unwrap();
    let acl = posix_acl(&[
        (0x01, 6, u32::MAX),
        (0x02, 6, 65534),
        (0x04, 4, u32::MAX),
        (0x10, 6, u32::MAX),
        (0x20, 0, u32::MAX),
    ]);
    let name = "system.posix_acl_access";
    match rustix::fs::setxattr(&shared, name, &acl, rustix::fs::XattrFlags::empty()) {
        Err(e) => skip("ACLs", &format!("setxattr {name}: {e}")),
        Ok(()) => {
            let mode = std::fs::metadata(&shared).unwrap().mode();
            ok(&kvik(&["write", p(&shared), "--size", "4KiB"]));
            let mut value = [0u8; 256];
            let n = rustix::fs::getxattr(&shared, name, &mut value[..]).unwrap();
            assert_eq!(&value[..n], &acl[..], "the ACL changed");
            assert_eq!(std::fs::metadata(&shared).unwrap().mode(), mode);
        }
    }
}

/// A POSIX access ACL as the kernel stores it: version 2, then (tag, perm,
/// id) entries.
fn posix_acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    acl
}

#[test]
fn what_cannot_be_kept_is_said_and_set_id_bits_are_not_kept_for_a_new_owner() {
    if !is_root() {
        return skip(
            "what_cannot_be_kept",
            "needs root to run kvik as another user",
        );
    }
    // A directory everyone may write to, holding root's files.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // Root's, but everyone may write it (cp would write into it in place
    // and keep the owner; a replacement cannot).
    let dst = dir.path().join("roots.bin");
    std::fs::write(&dst, b"root's").unwrap();
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o4757)).unwrap();
    let Some(out) = as_nobody(&["write", p(&dst), "--size", "4KiB"]) else {
        return;
    };
    fails(
        &out,
        0,
        &["owner 0 not kept", "group 0 not kept", "uid 65534"],
    );
    let meta = std::fs::metadata(&dst).unwrap();
    assert_eq!(meta.uid(), 65534);
    assert_eq!(
        meta.mode() & 0o7777,
        0o757,
        "set-ID bits kept for a new owner"
    );
    assert_eq!(meta.len(), 4096);

    // One nobody may not write is refused, though the directory is open.
    let locked = dir.path().join("locked.bin");
    std::fs::write(&locked, b"root's").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = as_nobody(&["write", p(&locked), "--size", "4KiB"]).unwrap();
    fails(&out, 2, &["is not writable", "is unchanged"]);
    assert_eq!(std::fs::read(&locked).unwrap(), b"root's");
    assert_eq!(std::fs::metadata(&locked).unwrap().uid(), 0);
}

#[test]
fn a_symlink_dst_is_written_through_and_hard_links_keep_the_old_content() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("real");
    std::fs::create_dir(&sub).unwrap();
    let target = sub.join("target.bin");
    ok(&kvik(&[
        "write",
        p(&target),
        "--size",
        "4KiB",
        "--seed",
        "1",
    ]));
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link.bin");
    std::os::unix::fs::symlink("real/target.bin", &link).unwrap();
    let w = json(&kvik(&[
        "write",
        p(&link),
        "--size",
        "8KiB",
        "--seed",
        "2",
        "--json",
    ]));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 8192);
    assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o640);
    assert_eq!(
        w["committed"]["written_through"],
        p(&std::fs::canonicalize(&target).unwrap())
    );
    assert_eq!(names(&sub), ["target.bin"]);

    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
    fails(
        &kvik(&["write", p(&dangling), "--size", "4KiB"]),
        2,
        &["does not exist"],
    );
    assert!(
        std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!dir.path().join("nowhere").exists());
    let a = dir.path().join("loop-a");
    std::os::unix::fs::symlink("loop-b", &a).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.path().join("loop-b")).unwrap();
    fails(
        &kvik(&["write", p(&a), "--size", "4KiB"]),
        2,
        &["symlink loop"],
    );

    // Hard links: DST becomes a new file; the other name keeps the old one.
    let first = dir.path().join("first.bin");
    let second = dir.path().join("second.bin");
    std::fs::write(&first, b"old content").unwrap();
    std::fs::hard_link(&first, &second).unwrap();
    let out = ok(&kvik(&["write", p(&first), "--size", "4KiB"])).clone();
    assert!(
        text(&out.stderr).contains("had 2 hard links"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&second).unwrap(), b"old content");
    assert_eq!(std::fs::metadata(&first).unwrap().len(), 4096);
}

#[test]
fn names_of_255_bytes_work() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "64KiB"]));
    let long = dir.path().join("n".repeat(255));
    // Two bytes a character: a cut inside one must not break the name.
    let wide = dir.path().join(format!("{}x", "é".repeat(127)));
    for env in ["0", "1"] {
        for dst in [&long, &wide] {
            for args in [
                vec!["write", p(dst), "--size", "4KiB"],
                vec!["copy", p(&src), p(dst)],
            ] {
                ok(&kvik_cmd(&args)
                    .env("KVIK_NO_TMPFILE", env)
                    .output()
                    .unwrap());
            }
            assert!(std::fs::read(dst).unwrap() == std::fs::read(&src).unwrap());
        }
        assert!(temporaries(dir.path()).is_empty());
    }
}

#[test]
fn json_with_a_path_that_is_not_utf8_is_lossless_and_the_write_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"caf\xe9-\xff.bin");
    let dst: PathBuf = dir.path().join(name);
    let args: Vec<&OsStr> = [
        "write".as_ref(),
        dst.as_os_str(),
        "--size".as_ref(),
        "4KiB".as_ref(),
        "--json".as_ref(),
    ]
    .to_vec();
    let w = json(&kvik(&args));
    let hex: String = dst
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(w["file"]["hex"], hex.as_str());
    assert_eq!(w["report"]["path"]["hex"], hex.as_str());
    assert!(
        w["file"]["lossy"]
            .as_str()
            .unwrap()
            .ends_with("caf\u{fffd}-\u{fffd}.bin")
    );
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 4096);

    let copy = dir.path().join(OsStr::from_bytes(b"\x80copy"));
    let c = json(&kvik(&[
        OsStr::new("copy"),
        dst.as_os_str(),
        copy.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert_eq!(c["source"]["hex"], hex.as_str());
    assert!(
        c["destination"]["hex"]
            .as_str()
            .unwrap()
            .ends_with("80636f7079")
    );
    let r = json(&kvik(&[
        OsStr::new("read"),
        copy.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert!(r["file"]["hex"].as_str().unwrap().ends_with("80636f7079"));
    // A UTF-8 path stays a plain string.
    let plain = dir.path().join("plain.bin");
    let w = json(&kvik(&["write", p(&plain), "--size", "4KiB", "--json"]));
    assert_eq!(w["file"], p(&plain));
}

#[test]
fn a_report_that_cannot_be_written_never_fails_a_committed_write() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");
    ok(&kvik(&["write", p(&dst), "--size", "4KiB", "--seed", "1"]));
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "64KiB", "--seed", "2"]));
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    for (args, size) in [
        (
            vec!["write", p(&dst), "--size", "16KiB", "--seed", "3"],
            16 << 10,
        ),
        (
            vec!["write", p(&dst), "--size", "32KiB", "--json"],
            32 << 10,
        ),
        (vec!["copy", p(&src), p(&dst)], 64 << 10),
    ] {
        let out = kvik_cmd(&args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        fails(
            &out,
            0,
            &[
                "was written, but the report could not be written",
                "No space left",
            ],
        );
        assert_eq!(std::fs::metadata(&dst).unwrap().len(), size, "{args:?}");
    }
    // A reader that went away: quiet success.
    let mut child = kvik_cmd(&["write", p(&dst), "--size", "8KiB"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 8 << 10);
}

#[test]
fn unusable_destinations_are_refused_before_anything_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let a = dir.path().join("loop-a");
    std::os::unix::fs::symlink("loop-b", &a).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.path().join("loop-b")).unwrap();
    let cases: [(PathBuf, &str); 5] = [
        (file.join("dst"), "not a directory"),
        (a.join("dst"), "symbolic link"),
        (dir.path().join("missing/dst"), "does not exist"),
        (dir.path().to_path_buf(), "is a directory"),
        (
            PathBuf::from(format!("{}/", p(&dir.path().join("new")))),
            "does not name a file",
        ),
    ];
    for (dst, needle) in &cases {
        fails(&kvik(&["write", p(dst), "--size", "4KiB"]), 2, &[needle]);
    }
    fails(&kvik(&["write", p(&file), "--size", "0"]), 2, &["zero"]);
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    assert_eq!(names(dir.path()), ["file", "loop-a", "loop-b"]);
}

#[test]
fn a_read_only_filesystem_is_refused_and_the_old_file_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ro.join("old.bin"), b"old").unwrap();
    let bound = Command::new("mount")
        .args(["--bind", p(&ro), p(&ro)])
        .status();
    if !bound.is_ok_and(|s| s.success()) {
        return skip("a_read_only_filesystem", "cannot bind-mount here");
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").args(["-l", p(self.0)]).status();
        }
    }
    let _unmount = Unmount(&ro);
    assert!(
        Command::new("mount")
            .args(["-o", "remount,bind,ro", p(&ro)])
            .status()
            .unwrap()
            .success()
    );
    let out = kvik(&["write", p(&ro.join("old.bin")), "--size", "4KiB"]);
    fails(&out, 2, &["Read-only file system", "is unchanged"]);
    assert_eq!(std::fs::read(ro.join("old.bin")).unwrap(), b"old");
}

#[test]
fn the_same_file_through_a_symlink_hard_link_or_bind_mount_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "64KiB"]));
    let before = std::fs::read(&src).unwrap();
    let link = dir.path().join("link.bin");
    std::os::unix::fs::symlink(&src, &link).unwrap();
    let hard = dir.path().join("hard.bin");
    std::fs::hard_link(&src, &hard).unwrap();
    for dst in [&link, &hard, &src] {
        fails(&kvik(&["copy", p(&src), p(dst)]), 2, &["the same file"]);
    }
    let other = tempfile::tempdir().unwrap();
    let bound = Command::new("mount")
        .args(["--bind", p(dir.path()), p(other.path())])
        .status();
    if bound.is_ok_and(|s| s.success()) {
        let out = kvik(&["copy", p(&src), p(&other.path().join("src.bin"))]);
        let _ = Command::new("umount")
            .args(["-l", p(other.path())])
            .status();
        fails(&out, 2, &["the same file"]);
    } else {
        skip(
            "the same file through a bind mount",
            "cannot bind-mount here",
        );
    }
    assert!(std::fs::read(&src).unwrap() == before);
}

#[test]
fn concurrent_writers_of_one_dst_leave_one_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");
    let mut expected = vec![];
    for seed in 1..=4 {
        let f = dir.path().join(format!("seed-{seed}"));
        ok(&kvik(&[
            "write",
            p(&f),
            "--size",
            "2MiB",
            "--seed",
            &seed.to_string(),
        ]));
        expected.push(std::fs::read(&f).unwrap());
        std::fs::remove_file(f).unwrap();
    }
    for round in 0..3 {
        let children: Vec<_> = (1..=4)
            .map(|seed| {
                kvik_cmd(&[
                    "write",
                    p(&dst),
                    "--size",
                    "2MiB",
                    "--seed",
                    &seed.to_string(),
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success());
        }
        let now = std::fs::read(&dst).unwrap();
        assert!(expected.contains(&now), "round {round}: DST is a mix");
        assert_eq!(names(dir.path()), ["dst.bin"]);
    }
}

#[test]
fn new_files_follow_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    for (umask, mode) in [(0o027, 0o640), (0o002, 0o664)] {
        let dst = dir.path().join(format!("u{umask:o}"));
        let mut cmd = kvik_cmd(&["write", p(&dst), "--size", "4KiB"]);
        // SAFETY: umask is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(umask);
                Ok(())
            });
        }
        ok(&cmd.output().unwrap());
        assert_eq!(std::fs::metadata(&dst).unwrap().mode() & 0o777, mode);
    }
}
