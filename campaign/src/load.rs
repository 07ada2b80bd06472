//! The load: clients asking every sidecar for IDs all the time over its Unix socket (binary
//! protocol, single IDs and batches; HTTP too), recording every request.

use idcar_core::frame::{self, Status};
use idcar_core::layout::{Layout, RequestOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::procs::now_ns;

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Outcome {
    /// IDs received: `ids[first..first + count]` of the client's ID list.
    Ok,
    /// The sidecar answered with a refusal (its reason).
    Refused(String),
    /// No answer in time (the request may or may not have been served).
    Timeout,
    /// No connection, or it broke (the request may or may not have been served).
    Failed(String),
}

/// One request in the history.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Op {
    pub sidecar: usize,
    /// The incarnation the connection reached.
    pub incarnation: u32,
    pub http: bool,
    pub asked: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub outcome: Outcome,
    /// Where its IDs are in the client's list.
    pub first: usize,
    pub count: usize,
}

/// What one client recorded.
#[derive(Default)]
pub struct ClientLog {
    pub ops: Vec<Op>,
    pub ids: Vec<u128>,
}

/// A client's settings.
pub struct Client {
    pub sidecar: usize,
    pub socket: PathBuf,
    pub incarnation: Arc<AtomicU32>,
    pub http: bool,
    pub layout: Arc<dyn Layout>,
    pub seed: u64,
    /// Pause between requests.
    pub pace: Duration,
    pub timeout: Duration,
    pub stop: Arc<AtomicBool>,
    /// Hard end, whatever `stop` says.
    pub deadline: Instant,
    /// At most this many requests.
    pub max_ops: usize,
}

/// A connection and the incarnation it reached.
struct Conn {
    stream: UnixStream,
    incarnation: u32,
}

impl Client {
    /// Runs until stopped; every request is recorded.
    pub fn run(self) -> ClientLog {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut log = ClientLog::default();
        let mut conn: Option<Conn> = None;
        while !self.stop.load(Ordering::Relaxed)
            && Instant::now() < self.deadline
            && log.ops.len() < self.max_ops
        {
            let asked = if rng.random_bool(0.6) {
                1
            } else {
                rng.random_range(2..=64)
            };
            let start_ns = now_ns();
            let (outcome, incarnation, ids) = if self.http {
                self.http_request(asked)
            } else {
                self.binary_request(&mut conn, asked)
            };
            let end_ns = now_ns();
            let first = log.ids.len();
            log.ids.extend_from_slice(&ids);
            log.ops.push(Op {
                sidecar: self.sidecar,
                incarnation,
                http: self.http,
                asked,
                start_ns,
                end_ns,
                outcome: outcome.clone(),
                first,
                count: ids.len(),
            });
            let pause = match outcome {
                Outcome::Ok => self.pace,
                // A sidecar refusing or gone: don't spin on it.
                _ => self.pace.max(Duration::from_millis(20)),
            };
            std::thread::sleep(pause.mul_f64(rng.random_range(0.5..1.5)));
        }
        log
    }

    fn connect(&self) -> Result<Conn, String> {
        // Read before connecting: a connection reaches this incarnation or none (the next
        // one starts only after this one exited).
        let incarnation = self.incarnation.load(Ordering::SeqCst);
        let stream = UnixStream::connect(&self.socket).map_err(|e| e.to_string())?;
        if self.incarnation.load(Ordering::SeqCst) != incarnation {
            // A restart in between: which process answered is unknown; ask again later.
            return Err("the sidecar restarted while connecting".into());
        }
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|_| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| e.to_string())?;
        Ok(Conn {
            stream,
            incarnation,
        })
    }

    fn binary_request(&self, conn: &mut Option<Conn>, asked: u32) -> (Outcome, u32, Vec<u128>) {
        if conn.is_none() {
            match self.connect() {
                Ok(c) => *conn = Some(c),
                Err(e) => return (Outcome::Failed(e), 0, Vec::new()),
            }
        }
        let c = conn.as_mut().expect("connected");
        let incarnation = c.incarnation;
        let r = exchange(&mut c.stream, asked);
        if !matches!(
            r,
            Ok(Ok(_)) | Ok(Err((Status::Unavailable | Status::BadRequest, _)))
        ) {
            *conn = None;
        }
        match r {
            Ok(Ok(ids)) => (Outcome::Ok, incarnation, ids),
            Ok(Err((_, reason))) => (Outcome::Refused(reason), incarnation, Vec::new()),
            Err(e) if is_timeout(&e) => (Outcome::Timeout, incarnation, Vec::new()),
            Err(e) => (Outcome::Failed(e.to_string()), incarnation, Vec::new()),
        }
    }

    /// One HTTP/1.1 request on its own connection: `GET /ids?count=N`.
    fn http_request(&self, asked: u32) -> (Outcome, u32, Vec<u128>) {
        let mut c = match self.connect() {
            Ok(c) => c,
            Err(e) => return (Outcome::Failed(e), 0, Vec::new()),
        };
        let req =
            format!("GET /ids?count={asked} HTTP/1.1\r\nHost: idcar\r\nConnection: close\r\n\r\n");
        let mut body = Vec::new();
        let r = c
            .stream
            .write_all(req.as_bytes())
            .and_then(|_| c.stream.read_to_end(&mut body));
        match r {
            Err(e) if is_timeout(&e) => return (Outcome::Timeout, c.incarnation, Vec::new()),
            Err(e) => return (Outcome::Failed(e.to_string()), c.incarnation, Vec::new()),
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&body);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return (
                Outcome::Failed("incomplete HTTP response".into()),
                c.incarnation,
                Vec::new(),
            );
        };
        if !head.starts_with("HTTP/1.1 200") {
            let status = head.lines().next().unwrap_or("").to_string();
            return (
                Outcome::Refused(format!("{status}: {}", body.trim())),
                c.incarnation,
                Vec::new(),
            );
        }
        let mut ids = Vec::new();
        for line in body.lines().filter(|l| !l.is_empty()) {
            match self.layout.parse(line.trim(), None) {
                Ok(bytes) => ids.push(to_u128(&bytes)),
                Err(e) => {
                    return (
                        Outcome::Failed(format!("unparsable ID {line:?}: {e}")),
                        c.incarnation,
                        ids,
                    )
                }
            }
        }
        (Outcome::Ok, c.incarnation, ids)
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// An ID's bytes as a big-endian number (IDs are at most 16 bytes).
pub fn to_u128(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |v, b| (v << 8) | u128::from(*b))
}

/// The number back as `width` bytes.
pub fn to_bytes(v: u128, width: usize) -> Vec<u8> {
    v.to_be_bytes()[16 - width..].to_vec()
}

type Refusal = (Status, String);

/// One binary get-IDs exchange: the IDs, or the sidecar's refusal.
pub fn exchange(s: &mut UnixStream, asked: u32) -> std::io::Result<Result<Vec<u128>, Refusal>> {
    let mut req = Vec::with_capacity(8);
    frame::encode_get_ids(asked, &RequestOptions::default(), &mut req);
    s.write_all(&req)?;
    let mut head = [0u8; frame::RESPONSE_HEADER];
    s.read_exact(&mut head)?;
    let h = frame::parse_response_header(&head)
        .map_err(std::io::Error::other)?
        .ok_or_else(|| std::io::Error::other("short header"))?;
    if h.len > 16 * 1024 * 1024 {
        return Err(std::io::Error::other("response too large"));
    }
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body)?;
    if h.status != Status::Ok {
        return Ok(Err((h.status, String::from_utf8_lossy(&body).into_owned())));
    }
    let w = usize::from(h.width);
    if w == 0 || w > 16 || !body.len().is_multiple_of(w) {
        return Err(std::io::Error::other("bad ID width"));
    }
    Ok(Ok(body.chunks(w).map(to_u128).collect()))
}
