//! Remote reads from a real S3 endpoint on localhost: moto's server
//! (`common::moto`), reached as S3 (signed requests), through S3 URLs of
//! both forms, through boto3's presigned URLs, and as a plain HTTP server
//! with byte ranges. Without moto these tests print "skipped: …" (a
//! failure under `KVIK_REQUIRE_REMOTE=1`).

mod common;

use common::moto::{ACCESS_KEY, Moto, REGION, SECRET_KEY, moto};
use common::{object, quick, ranges};
use kvik_remote::{EndpointKind, Error, RemoteFile, RemoteOptions, S3Options};

const TASK: u64 = 256 << 10;

fn s3_options(moto: &Moto) -> RemoteOptions {
    let mut options = RemoteOptions::new();
    options
        .settings(quick(3, 10_000))
        .task_size(TASK)
        .max_in_flight(4)
        .s3(S3Options {
            region: Some(REGION.into()),
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            endpoint_url: Some(moto.endpoint.clone()),
            session_token: None,
        });
    options
}

/// Read every interesting range of `file` and compare with `bytes`.
fn check_ranges(file: &RemoteFile, bytes: &[u8]) {
    assert_eq!(file.nbytes(), bytes.len() as u64);
    for (offset, len) in ranges(bytes.len() as u64, TASK) {
        let mut buf = vec![0u8; len as usize];
        let done = file.read_with_report(&mut buf, offset).unwrap();
        assert_eq!(done.bytes as u64, len);
        assert!(
            buf[..] == bytes[offset as usize..(offset + len) as usize],
            "{}: bytes {offset}+{len} differ",
            file.url()
        );
        let report = &done.report;
        assert_eq!(report.bytes, len);
        assert!(
            report
                .requests
                .iter()
                .all(|r| r.attempts.len() == 1 && r.attempts[0].status == Some(206)),
            "{report}"
        );
    }
}

#[test]
fn s3_objects_read_exactly() {
    let Some(moto) = moto() else { return };
    moto.create_bucket("exact");
    let objects = [
        ("empty.bin", object(0, 1)),
        ("one.bin", object(1, 2)),
        ("dir/multi.bin", object(3 * TASK as usize + 4097, 3)),
    ];
    for (key, bytes) in &objects {
        moto.put("exact", key, bytes);
    }
    for (key, bytes) in &objects {
        let file = s3_options(moto).open_s3("exact", key).unwrap();
        assert_eq!(file.endpoint_kind(), EndpointKind::S3);
        assert_eq!(file.url(), format!("s3://exact/{key}"));
        check_ranges(&file, bytes);
        let err = file.read(&mut [0u8; 2], bytes.len() as u64).unwrap_err();
        assert!(matches!(err, Error::PastEnd { .. }), "{err}");
    }
    // The multi-range read is cut by the task size.
    let file = s3_options(moto).open_s3("exact", "dir/multi.bin").unwrap();
    let (buf, done) = file
        .pread(vec![0u8; file.nbytes() as usize], 0)
        .wait()
        .unwrap();
    assert!(buf[..] == objects[2].1[..]);
    assert_eq!(done.report.requests.len(), 4);
    assert_eq!(done.report.endpoint, EndpointKind::S3);
}

#[test]
fn s3_urls_of_every_form_reach_the_same_object() {
    let Some(moto) = moto() else { return };
    moto.create_bucket("forms");
    let bytes = object(TASK as usize + 3, 4);
    moto.put("forms", "a/b.bin", &bytes);
    let path_style = format!("{}/forms/a/b.bin", moto.endpoint);
    let options = s3_options(moto);
    for file in [
        options.open_s3_url("s3://forms/a/b.bin").unwrap(),
        options.open("s3://forms/a/b.bin").unwrap(),
        // A path-style URL names the endpoint itself.
        RemoteOptions::new()
            .settings(quick(3, 10_000))
            .s3(S3Options {
                access_key_id: Some(ACCESS_KEY.into()),
                secret_access_key: Some(SECRET_KEY.into()),
                ..S3Options::default()
            })
            .open_s3_url(&path_style)
            .unwrap(),
    ] {
        assert_eq!(file.endpoint_kind(), EndpointKind::S3);
        let mut buf = vec![0u8; bytes.len()];
        file.read(&mut buf, 0).unwrap();
        assert!(buf[..] == bytes[..]);
    }
}

#[test]
fn a_missing_key_is_not_found_once() {
    let Some(moto) = moto() else { return };
    moto.create_bucket("missing");
    let err = s3_options(moto)
        .open_s3("missing", "no/such.bin")
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound { status: 404, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("s3://missing/no/such.bin"),
        "{err}"
    );
}

#[test]
fn presigned_urls_read_with_plain_gets() {
    let Some(moto) = moto() else { return };
    moto.create_bucket("signed");
    let bytes = object(2 * TASK as usize + 11, 5);
    moto.put("signed", "obj.bin", &bytes);
    moto.put("signed", "empty.bin", &[]);
    let url = moto.presigned_url("signed", "obj.bin");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let options = {
        let mut o = RemoteOptions::new();
        o.settings(quick(3, 10_000)).task_size(TASK);
        o
    };
    let file = options.open(&url).unwrap();
    assert_eq!(file.endpoint_kind(), EndpointKind::S3Presigned);
    // The signature stays out of reports and errors.
    assert!(!file.url().contains("Signature"), "{}", file.url());
    assert!(file.url().ends_with("/signed/obj.bin?…"), "{}", file.url());
    check_ranges(&file, &bytes);
    let same = options.open_s3_presigned_url(&url).unwrap();
    assert_eq!(same.nbytes(), bytes.len() as u64);
    // The one-byte probe of an empty object answers 416: size 0.
    let empty = options
        .open(&moto.presigned_url("signed", "empty.bin"))
        .unwrap();
    assert_eq!(empty.nbytes(), 0);
    // Not a presigned URL.
    let err = options
        .open_s3_presigned_url(&format!("{}/signed/obj.bin", moto.endpoint))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
}

#[test]
fn moto_as_a_plain_http_server_with_ranges() {
    let Some(moto) = moto() else { return };
    moto.create_bucket("plain");
    let bytes = object(TASK as usize * 2 + 1, 6);
    moto.put_public("plain", "x.bin", &bytes);
    moto.put("plain", "private.bin", &bytes);
    let mut options = RemoteOptions::new();
    options.settings(quick(3, 10_000)).task_size(TASK);
    let file = options
        .open_http(&format!("{}/plain/x.bin", moto.endpoint))
        .unwrap();
    assert_eq!(file.endpoint_kind(), EndpointKind::Http);
    check_ranges(&file, &bytes);
    // A private object, read anonymously: S3's 403, at once.
    let private = format!("{}/plain/private.bin", moto.endpoint);
    let err = options.open_http(&private).unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { status: 403, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(&private), "{err}");
    // Unsigned S3 requests (no credentials) read the public object.
    let public = options
        .open_s3_public(&format!("{}/plain/x.bin", moto.endpoint))
        .unwrap();
    assert_eq!(public.endpoint_kind(), EndpointKind::S3Public);
    let mut buf = vec![0u8; bytes.len()];
    public.read(&mut buf, 0).unwrap();
    assert!(buf[..] == bytes[..]);
}
