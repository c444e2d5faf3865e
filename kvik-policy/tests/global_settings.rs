//! The process-wide settings: API overrides, scoped overrides that restore,
//! and handles opened with `FileHandle::open` reading them per request.
//!
//! One test function: the global settings are process-wide, and the harness
//! runs the tests of a binary on several threads.

mod common;

use kvik_policy::{CompatMode, FileHandle, Settings, Source};

#[test]
fn overrides_apply_and_scopes_restore() {
    let environment = Settings::environment().expect("the test environment has valid KVIKIO_*");
    assert_eq!(Settings::global().unwrap(), environment);

    // A scoped override, nested.
    {
        let _outer = Settings::scoped(|s| {
            s.set_compat_mode(CompatMode::On);
            s.set_task_size(8192).map(drop)
        })
        .unwrap();
        let outer = Settings::global().unwrap();
        assert_eq!(
            (outer.compat_mode(), outer.task_size()),
            (CompatMode::On, 8192)
        );
        assert_eq!(outer.describe()[2].source, Source::Api);
        {
            let _inner = Settings::scoped(|s| s.set_num_threads(3).map(drop)).unwrap();
            let inner = Settings::global().unwrap();
            assert_eq!((inner.num_threads(), inner.task_size()), (3, 8192));

            // A handle opened under the global settings reads them per request.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("global");
            std::fs::write(&path, common::random_bytes(40_000, 1)).unwrap();
            let f = FileHandle::open(&path, "r").unwrap();
            let mut buf = vec![0u8; 40_000];
            let done = f.read_with_report(&mut buf, 0).unwrap();
            assert_eq!(done.report.kvik.task_size, 8192);
            assert_eq!(done.report.kvik.execution.threads(), 3);
            assert_eq!(done.report.task_count(), 5);
            drop(_inner);
            let later = f.read_with_report(&mut buf, 0).unwrap();
            assert_eq!(later.report.kvik.execution.threads(), outer.num_threads());
        }
        assert_eq!(
            Settings::global().unwrap(),
            outer,
            "the inner scope restored"
        );
    }
    assert_eq!(
        Settings::global().unwrap(),
        environment,
        "the outer scope restored"
    );

    // Scopes that overlap, ended out of order: the outer one first.
    {
        let outer = Settings::scoped(|s| {
            s.set_task_size(8192)?.set_num_threads(2)?;
            Ok(())
        })
        .unwrap();
        let inner = Settings::scoped(|s| s.set_task_size(4096).map(drop)).unwrap();
        drop(outer);
        let left = Settings::global().unwrap();
        assert_eq!(left.task_size(), 4096, "the inner scope's change stays");
        assert_eq!(
            left.num_threads(),
            environment.num_threads(),
            "the outer scope's change went with it"
        );
        drop(inner);
        assert_eq!(
            Settings::global().unwrap(),
            environment,
            "both ended: as before both"
        );
    }

    // A failing update changes nothing.
    let err = Settings::scoped(|s| s.set_num_threads(0).map(drop)).unwrap_err();
    assert!(err.to_string().contains("num_threads"), "{err}");
    assert_eq!(Settings::global().unwrap(), environment);

    // set_global until reset_global.
    let mut replaced = Settings::default();
    replaced.set_gds_threshold(0);
    Settings::set_global(replaced.clone());
    assert_eq!(Settings::global().unwrap(), replaced);
    Settings::reset_global();
    assert_eq!(Settings::global().unwrap(), environment);
}
