//! A small HTTP/1.1 server on localhost with byte ranges, that can also
//! misbehave on cue: answer an error status, stall mid-body, never answer,
//! truncate the body, lie in Content-Length, reset the connection
//! mid-body, ignore the Range header. Each request is answered as a script
//! says (by its index, method and range) and logged.
//!
//! Threads: one accepting, one per connection. Dropping the server stops
//! them all (stalled answers included) and waits for them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One request, as the script sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Its place among all requests to this server (0, 1, …).
    pub index: usize,
    pub method: String,
    pub path: String,
    /// `Range: bytes=a-b`, as (a, b) with b inclusive.
    pub range: Option<(u64, u64)>,
}

/// How to answer one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Correctly: HEAD 200, GET 206 for a range (416 when it starts past
    /// the end), 200 without one, 404 for an unknown path.
    Serve,
    /// This status, with a short body.
    Status(u16),
    /// Correct headers and `after` body bytes, then nothing, connection open.
    Stall { after: usize },
    /// Read the request, never answer.
    NoAnswer,
    /// Correct headers and `after` body bytes, then close.
    Truncate { after: usize },
    /// Content-Length off by `delta` from the range sent (whole range sent,
    /// then close).
    WrongLength { delta: i64 },
    /// Correct headers and `after` body bytes, then a TCP reset.
    Reset { after: usize },
    /// Ignore Range: 200 with the whole object.
    WholeObject,
}

pub type Script = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// Every request answered `Serve`.
pub fn serve_all() -> Script {
    Arc::new(|_| Reply::Serve)
}

#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Request>>>,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

struct Shared {
    objects: HashMap<String, Arc<[u8]>>,
    script: Script,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Request>>>,
    next_index: AtomicUsize,
}

impl Server {
    /// Serve `objects` (path → bytes, paths like `/data.bin`) on 127.0.0.1.
    pub fn start(objects: Vec<(&str, Arc<[u8]>)>, script: Script) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let shared = Arc::new(Shared {
            objects: objects
                .into_iter()
                .map(|(p, b)| (p.to_string(), b))
                .collect(),
            script,
            stop: stop.clone(),
            log: log.clone(),
            next_index: AtomicUsize::new(0),
        });
        let conns = connections.clone();
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                let handle = std::thread::spawn(move || serve_connection(stream, &shared));
                conns.lock().unwrap().push(handle);
            }
        });
        Server {
            addr,
            stop,
            log,
            accept: Some(accept),
            connections,
        }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    /// The GET requests so far.
    pub fn gets(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "GET")
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let handles = std::mem::take(&mut *self.connections.lock().unwrap());
        for handle in handles {
            let _ = handle.join();
        }
    }
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    // Short reads, so an idle connection notices the stop.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut writer = stream;
    loop {
        let Some(head) = read_head(&mut reader, &shared.stop) else {
            return;
        };
        let request = parse(&head, shared.next_index.fetch_add(1, Ordering::SeqCst));
        shared.log.lock().unwrap().push(request.clone());
        let reply = (shared.script)(&request);
        if !answer(&mut writer, &request, reply, shared) {
            return;
        }
    }
}

/// The request's head (up to the blank line), or None when the client
/// closed or the server stops.
fn read_head(reader: &mut BufReader<TcpStream>, stop: &AtomicBool) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => {
                head.push_str(&line);
                if line == "\r\n" || line == "\n" {
                    return Some(head);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                head.push_str(&line);
                if stop.load(Ordering::SeqCst) {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

fn parse(head: &str, index: usize) -> Request {
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let range = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("range") {
            return None;
        }
        let (a, b) = value.trim().strip_prefix("bytes=")?.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    });
    Request {
        index,
        method,
        path,
        range,
    }
}

/// Answer one request; false when the connection is done.
fn answer(out: &mut TcpStream, request: &Request, reply: Reply, shared: &Shared) -> bool {
    // The path without a query string (presigned-style URLs).
    let path = request.path.split('?').next().unwrap_or_default();
    let Some(object) = shared.objects.get(path) else {
        return simple(out, request, 404, "Not Found");
    };
    let size = object.len() as u64;
    if let Reply::Status(code) = reply {
        return simple(out, request, code, "scripted failure");
    }
    if reply == Reply::NoAnswer {
        idle(&shared.stop);
        return false;
    }
    if request.method == "HEAD" {
        let head =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nAccept-Ranges: bytes\r\n\r\n");
        return out.write_all(head.as_bytes()).is_ok();
    }
    let (status, body, content_range) = match (request.range, reply) {
        (_, Reply::WholeObject) | (None, _) => ("200 OK", &object[..], None),
        (Some((start, _)), _) if start >= size => {
            let head = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\nContent-Length: 0\r\n\r\n"
            );
            return out.write_all(head.as_bytes()).is_ok();
        }
        (Some((start, end)), _) => {
            let end = end.min(size - 1);
            (
                "206 Partial Content",
                &object[start as usize..=end as usize],
                Some(format!("bytes {start}-{end}/{size}")),
            )
        }
    };
    let claimed = match reply {
        Reply::WrongLength { delta } => (body.len() as i64 + delta).max(0) as usize,
        _ => body.len(),
    };
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {claimed}\r\n");
    if let Some(range) = content_range {
        head.push_str(&format!("Content-Range: {range}\r\n"));
    }
    head.push_str("\r\n");
    if out.write_all(head.as_bytes()).is_err() {
        return false;
    }
    match reply {
        Reply::Serve | Reply::WholeObject => out.write_all(body).is_ok(),
        Reply::Stall { after } => {
            let _ = out.write_all(&body[..after.min(body.len())]);
            let _ = out.flush();
            idle(&shared.stop);
            false
        }
        Reply::Truncate { after } => {
            let _ = out.write_all(&body[..after.min(body.len())]);
            false
        }
        Reply::WrongLength { .. } => {
            let _ = out.write_all(body);
            false
        }
        Reply::Reset { after } => {
            let _ = out.write_all(&body[..after.min(body.len())]);
            let _ = out.flush();
            // Give the bytes time to leave, then reset instead of closing.
            std::thread::sleep(Duration::from_millis(20));
            reset(out);
            false
        }
        Reply::Status(_) | Reply::NoAnswer => unreachable!("answered above"),
    }
}

/// A status with a short text body (none for a HEAD).
fn simple(out: &mut TcpStream, request: &Request, code: u16, text: &str) -> bool {
    let body = if request.method == "HEAD" { "" } else { text };
    let reply = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{body}",
        text.len()
    );
    out.write_all(reply.as_bytes()).is_ok()
}

/// Wait until the server stops (at most a minute: a test never needs more).
fn idle(stop: &AtomicBool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Close with a TCP reset: SO_LINGER with a zero timeout, then close.
fn reset(stream: &TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(stream, Some(Duration::ZERO));
}

/// `http://127.0.0.1:PORT{path}` where nothing listens (a port just
/// released): a connection to it is refused.
pub fn refused_url(path: &str) -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port();
    format!("http://127.0.0.1:{port}{path}")
}
