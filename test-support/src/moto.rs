//! A real S3 endpoint for the tests: moto's server (`pip install
//! 'moto[server]'`), started once per test binary on a free port of
//! 127.0.0.1.
//!
//! The server runs in a Python process that exits when its standard input
//! closes: the test binary holds the other end, so when the binary exits
//! (however it exits) the server goes too.
//!
//! Without moto, tests print "skipped: …" and return; with
//! `KVIK_REQUIRE_REMOTE=1` (CI) that is a failure instead.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub const SKIP: &str = "skipped: moto not installed (python3 -m pip install 'moto[server]')";

/// Credentials moto accepts (any).
pub const ACCESS_KEY: &str = "testing";
pub const SECRET_KEY: &str = "testing";
pub const REGION: &str = "us-east-1";

#[derive(Debug)]
pub struct Moto {
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
    addr: String,
    _process: Mutex<Child>,
}

const SERVER: &str = r#"
import logging, sys
logging.disable(logging.CRITICAL)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"#;

/// The shared server, or None (after printing why) when moto is missing.
///
/// # Panics
/// When moto is missing and `KVIK_REQUIRE_REMOTE=1`, or moto is installed
/// but does not start.
pub fn moto() -> Option<&'static Moto> {
    static MOTO: OnceLock<Option<Moto>> = OnceLock::new();
    let moto = MOTO.get_or_init(start).as_ref();
    if moto.is_none() {
        assert!(
            !crate::required(crate::REQUIRE_REMOTE),
            "KVIK_REQUIRE_REMOTE=1 but moto is not installed (python3 -m pip install 'moto[server]')"
        );
        // Past the test harness's capture: the terminal shows it.
        let _ = writeln!(std::io::stderr(), "{SKIP}");
    }
    moto
}

fn installed() -> bool {
    Command::new("python3")
        .args(["-c", "import moto.server, boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start() -> Option<Moto> {
    if !installed() {
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python3 for moto");
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = send.send(line);
    });
    let line = receive
        .recv_timeout(Duration::from_secs(60))
        .expect("moto did not start within 60 s");
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("moto did not print its port: {line:?}"));
    let addr = format!("127.0.0.1:{port}");
    Some(Moto {
        endpoint: format!("http://{addr}"),
        addr,
        _process: Mutex::new(child),
    })
}

impl Moto {
    /// One unsigned request (moto accepts them); the status.
    fn request(&self, method: &str, path: &str, headers: &str, body: &[u8]) -> u16 {
        let mut stream = TcpStream::connect(&self.addr).expect("connect to moto");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).unwrap();
        let text = String::from_utf8_lossy(&reply);
        text.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status from moto: {text:.200}"))
    }

    pub fn create_bucket(&self, bucket: &str) {
        let status = self.request("PUT", &format!("/{bucket}"), "", b"");
        assert_eq!(status, 200, "create bucket {bucket}");
    }

    /// Store a private object (anonymous reads get 403).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let status = self.request("PUT", &format!("/{bucket}/{key}"), "", bytes);
        assert_eq!(status, 200, "put {bucket}/{key}");
    }

    /// Store an object anyone may read (canned ACL `public-read`).
    pub fn put_public(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let path = format!("/{bucket}/{key}");
        let status = self.request("PUT", &path, "x-amz-acl: public-read\r\n", bytes);
        assert_eq!(status, 200, "put {bucket}/{key}");
    }

    /// A presigned GET URL for the object (SigV4), made by boto3 (moto's
    /// dependency), as a user would make one.
    pub fn presigned_url(&self, bucket: &str, key: &str) -> String {
        let script = format!(
            "import boto3, botocore.config; print(boto3.client('s3', endpoint_url='{}', \
             aws_access_key_id='{ACCESS_KEY}', aws_secret_access_key='{SECRET_KEY}', \
             region_name='{REGION}', config=botocore.config.Config(signature_version='s3v4'))\
             .generate_presigned_url('get_object', \
             Params={{'Bucket': '{bucket}', 'Key': '{key}'}}, ExpiresIn=600))",
            self.endpoint
        );
        let output = Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("run boto3");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }
}
