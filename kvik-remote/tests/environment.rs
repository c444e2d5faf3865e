//! Settings from the environment, as a user sets them: `AWS_*` for S3
//! (credentials, region, `AWS_ENDPOINT_URL`) and `KVIKIO_HTTP_*` for the
//! retry policy, with no options in the program. One test in its own binary:
//! it sets the process environment before anything else runs.

mod common;

use common::moto::{ACCESS_KEY, REGION, SECRET_KEY, moto};
use common::object;
use kvik_remote::{EndpointKind, RemoteFile, RemoteSettings};

#[test]
fn aws_and_kvikio_variables_are_read_from_the_environment() {
    // Settle moto (and the skip) first; no thread of ours reads the
    // environment while it changes below.
    let Some(moto) = moto() else { return };
    moto.create_bucket("environment");
    let bytes = object(300_000, 7);
    moto.put("environment", "data.bin", &bytes);
    for (name, value) in [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_DEFAULT_REGION", REGION),
        ("AWS_ENDPOINT_URL", moto.endpoint.as_str()),
        ("KVIKIO_HTTP_MAX_ATTEMPTS", "4"),
        ("KVIKIO_HTTP_TIMEOUT", "7"),
        ("KVIKIO_HTTP_STATUS_CODES", "503"),
        ("KVIKIO_TASK_SIZE", "64KiB"),
    ] {
        // SAFETY: this binary's only test; no other thread reads or writes
        // the environment now (moto runs in another process, and the runtime
        // that remote requests use starts after this loop).
        unsafe { std::env::set_var(name, value) };
    }

    let settings = RemoteSettings::global().unwrap();
    assert_eq!(settings.http_max_attempts(), 4);
    assert_eq!(settings.http_timeout().as_secs(), 7);
    assert_eq!(settings.http_status_codes().0, vec![503]);

    let file = RemoteFile::open("s3://environment/data.bin").unwrap();
    assert_eq!(file.endpoint_kind(), EndpointKind::S3);
    assert_eq!(file.nbytes(), 300_000);
    let mut buf = vec![0u8; 300_000];
    let done = file.read_with_report(&mut buf, 0).unwrap();
    assert!(buf[..] == bytes[..]);
    // KVIKIO_TASK_SIZE cut the read; the policy is the environment's.
    assert_eq!(done.report.task_size, 64 << 10);
    assert_eq!(done.report.requests.len(), 5);
    assert_eq!(done.report.policy.max_attempts, 4);
    assert_eq!(done.report.policy.retry_status_codes, vec![503]);
}
