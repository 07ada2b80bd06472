//! The client against real servers (clients/SPEC.md's required tests), and against fake ones.

mod common;

use common::{decode_json, Server};
use idcar_client::{Client, Connection, Error, RequestOptions};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

#[test]
fn ids_are_unique_across_threads_with_and_without_prefetch() {
    let s = Server::start(&["--layout", "lable64"]);
    for prefetch in [0, 200] {
        let c = Client::builder()
            .socket(&s.socket)
            .prefetch(prefetch)
            .build()
            .unwrap();
        let all: Vec<String> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..6)
                .map(|w| {
                    let c = &c;
                    scope.spawn(move || {
                        let mut got = Vec::new();
                        for i in 0..400 {
                            if (w + i) % 50 == 0 {
                                got.extend(c.ids(37).unwrap().iter().map(|id| id.to_string()));
                            } else {
                                got.push(c.next_id().unwrap().to_string());
                            }
                        }
                        got
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        assert!(all.len() >= 2_400, "{}", all.len());
        let unique: HashSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "prefetch {prefetch}: duplicates");
    }
}

#[test]
fn a_server_restart_mid_stream_is_absorbed() {
    let mut s = Server::start(&["--layout", "lable64"]);
    // One connection: a place leaked by a failed connect would stop every later call.
    for prefetch in [0, 50] {
        let c = Client::builder()
            .socket(&s.socket)
            .prefetch(prefetch)
            .connections(1)
            .build()
            .unwrap();
        let mut seen = HashSet::new();
        for id in c.ids(300).unwrap() {
            assert!(seen.insert(id.as_u64().unwrap()));
        }
        s.restart();
        for _ in 0..300 {
            let id = c.next_u64().unwrap();
            assert!(seen.insert(id), "{id:x} twice across the restart");
        }
        assert_eq!(seen.len(), 600);
    }
}

#[test]
fn unavailable_is_retried_until_the_deadline_then_an_error_with_the_reason() {
    let s = Server::start_unready(&["--zk", "127.0.0.1:1", "--zk-session-timeout", "2s"]);
    let c = Client::builder()
        .socket(&s.socket)
        .retry_deadline(Duration::from_secs(1))
        .build()
        .unwrap();
    let start = Instant::now();
    match c.next_id() {
        Err(Error::Unavailable(reason)) => assert!(!reason.is_empty()),
        other => panic!("{other:?}"),
    }
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // No retry at all with a zero deadline.
    let c = Client::builder()
        .socket(&s.socket)
        .retry_deadline(Duration::ZERO)
        .build()
        .unwrap();
    let start = Instant::now();
    assert!(matches!(c.ids(3), Err(Error::Unavailable(_))));
    assert!(start.elapsed() < Duration::from_millis(900));
}

#[test]
fn a_missing_socket_is_a_clear_error_within_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.sock");
    let start = Instant::now();
    let err = Client::builder()
        .socket(&missing)
        .retry_deadline(Duration::from_millis(300))
        .build()
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    match &err {
        Error::Connect { socket, source } => {
            assert_eq!(socket, &missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(missing.to_str().unwrap()), "{err}");
}

#[test]
fn decoding_agrees_with_idcar_decode_for_every_layout() {
    for (layout, extra) in [
        ("lable64", &["--cluster-id", "5"][..]),
        ("ugd60", &[][..]),
        ("si53", &["--mid-bits", "3"][..]),
        ("sno80", &[][..]),
        ("muid128", &[][..]),
        ("uuid7", &["--cluster-id", "5"][..]),
    ] {
        let mut args = vec!["--layout", layout];
        args.extend_from_slice(extra);
        let s = Server::start(&args);
        let c = Client::connect(&s.socket).unwrap();
        let d = c.describe().unwrap();
        assert_eq!(d.layout, layout);
        let decode_flags: &[&str] = if layout == "si53" { extra } else { &[] };
        for id in c.ids(5).unwrap() {
            let text = id.to_string();
            let ours: serde_json::Value =
                serde_json::from_str(&id.decode().unwrap().to_json()).unwrap();
            let theirs = decode_json(layout, decode_flags, &text);
            assert_eq!(ours, theirs, "{layout} {text}");
            // The text form reads back to the same bytes.
            assert_eq!(d.parse_id(&text).unwrap().as_bytes(), id.as_bytes());
        }
        #[cfg(feature = "uuid")]
        match c.next_uuid() {
            Ok(u) => {
                assert_eq!(layout, "uuid7");
                assert_eq!(u.get_version_num(), 7);
                assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            }
            Err(e) => assert!(layout != "uuid7" && matches!(e, Error::Invalid(_)), "{e}"),
        }
        if d.width == 8 {
            assert!(c.next_u64().is_ok());
        } else {
            assert!(matches!(c.next_u64(), Err(Error::Invalid(_))), "{layout}");
        }
    }
}

#[test]
fn a_socket_in_a_missing_directory_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nodir").join("idcar.sock");
    let start = Instant::now();
    let err = Client::builder()
        .socket(&missing)
        .retry_deadline(Duration::from_secs(5))
        .build()
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "retried a directory that cannot appear: {:?}",
        start.elapsed()
    );
    assert!(matches!(err, Error::NoDirectory { .. }), "{err:?}");
    let said = format!(
        "directory {} does not exist",
        dir.path().join("nodir").display()
    );
    assert!(err.to_string().contains(&said), "{err}");
}

/// A fake idcar that issues 1, 2, 3, ... (8-byte IDs) in the order requests arrive, on any
/// connection, and answers each 30 ms late: a prefetch refill is in flight whenever the
/// buffer runs dry.
fn slow_counter(s: &mut std::os::unix::net::UnixStream) {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    for _ in 0..100_000 {
        let mut head = [0u8; 4];
        if s.read_exact(&mut head).is_err() {
            return;
        }
        let mut body = vec![0; usize::from(u16::from_be_bytes([head[2], head[3]]))];
        if s.read_exact(&mut body).is_err() {
            return;
        }
        if head[1] == 2 {
            let _ = s.write_all(&describe_answer());
            continue;
        }
        let count = u64::from(u32::from_be_bytes(body[..4].try_into().unwrap()));
        let first = NEXT.fetch_add(count, SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        let mut out = vec![0xd1, 0, 8, 0];
        out.extend_from_slice(&((count * 8) as u32).to_be_bytes());
        for id in first..first + count {
            out.extend_from_slice(&id.to_be_bytes());
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

#[test]
fn prefetched_ids_come_in_issue_order() {
    let (_dir, path) = fake(slow_counter);
    let c = Client::builder()
        .socket(&path)
        .prefetch(20)
        .build()
        .unwrap();
    let increasing = |v: &[u64]| v.windows(2).all(|w| w[0] < w[1]);
    let one: Vec<u64> = (0..100).map(|_| c.next_u64().unwrap()).collect();
    assert!(increasing(&one), "one caller: {one:?}");
    let mut batches = Vec::new();
    for _ in 0..10 {
        batches.extend(c.ids(7).unwrap().iter().map(|i| i.as_u64().unwrap()));
    }
    assert!(
        increasing(&batches) && batches[0] > one[99],
        "ids(7): {batches:?}"
    );
    let all: Vec<Vec<u64>> = std::thread::scope(|sc| {
        let callers: Vec<_> = (0..4)
            .map(|_| sc.spawn(|| (0..50).map(|_| c.next_u64().unwrap()).collect::<Vec<_>>()))
            .collect();
        callers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for mine in &all {
        assert!(increasing(mine), "a thread: {mine:?}");
    }
    let mut flat = all.concat();
    flat.sort_unstable();
    flat.dedup();
    assert_eq!(flat.len(), 200);
}

/// A fake server on a socket: answers every connection with `answer(request bytes)`.
fn fake(
    answer: fn(&mut std::os::unix::net::UnixStream),
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.sock");
    let l = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        // Bounded: a test makes a few connections at most.
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || answer(&mut s));
        }
    });
    (dir, path)
}

/// A fake server's answer to describe: lable64, 8-byte IDs.
fn describe_answer() -> Vec<u8> {
    let body = br#"{"layout":"lable64","width":8,"form":"hex","params":{}}"#;
    let mut out = vec![0xd1, 0, 8, 0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Reads a describe request and answers it.
fn answer_describe(s: &mut std::os::unix::net::UnixStream) {
    let mut b = [0; 4];
    let _ = s.read_exact(&mut b);
    let _ = s.write_all(&describe_answer());
}

#[test]
fn a_bad_or_silent_peer_is_an_error_not_a_hang() {
    // A short timeout for the silent peer only: the others answer, however busy the machine.
    let with_timeout = |p: &std::path::Path, t: u64| {
        Client::builder()
            .socket(p)
            .timeout(Duration::from_millis(t))
            .retry_deadline(Duration::ZERO)
            .build()
    };
    let quick = |p: &std::path::Path| with_timeout(p, 5_000);
    // Garbage.
    let (_d, garbage) = fake(|s| {
        let mut b = [0; 4];
        let _ = s.read_exact(&mut b);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    let start = Instant::now();
    assert!(matches!(quick(&garbage), Err(Error::Protocol(_))));
    // Silence.
    let (_d2, silent) = fake(|s| {
        let mut b = [0; 64];
        let _ = s.read(&mut b);
        std::thread::sleep(Duration::from_secs(3));
    });
    assert!(matches!(with_timeout(&silent, 300), Err(Error::Timeout)));
    // A width that is not the described one.
    let (_d3, liar) = fake(|s| {
        answer_describe(s);
        let mut req = [0; 8];
        let _ = s.read_exact(&mut req);
        let _ = s.write_all(&[0xd1, 0, 10, 0, 0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        std::thread::sleep(Duration::from_millis(500));
    });
    let c = quick(&liar).unwrap();
    assert!(matches!(c.next_id(), Err(Error::Protocol(_))));
    // More IDs than were asked for.
    let (_d4, generous) = fake(|s| {
        answer_describe(s);
        let mut req = [0; 8];
        let _ = s.read_exact(&mut req);
        let mut answer = vec![0xd1, 0, 8, 0, 0, 0, 0, 16];
        answer.extend_from_slice(&[0; 16]);
        let _ = s.write_all(&answer);
        std::thread::sleep(Duration::from_millis(500));
    });
    let c = quick(&generous).unwrap();
    match c.ids(1) {
        Err(Error::Protocol(why)) => assert!(why.contains("request for 1"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(15));
}

#[test]
fn connections_pipeline_refusals_keep_the_connection_and_options_reach_the_server() {
    let s = Server::start(&["--layout", "sno80"]);
    let mut c = Connection::connect(&s.socket, Some(Duration::from_secs(5))).unwrap();
    for n in [3, 5, 7] {
        c.send(n).unwrap();
    }
    let sizes: Vec<usize> = (0..3).map(|_| c.recv().unwrap().len()).collect();
    assert_eq!(sizes, [3, 5, 7]);
    assert!(matches!(c.ids(0), Err(Error::BadRequest(_))));
    c.send_raw(&[0xd1, 0x7f, 0, 0]).unwrap();
    assert!(matches!(c.recv(), Err(Error::BadRequest(_))));
    let opts = RequestOptions {
        meta: Some(0x2a),
        transaction: false,
    };
    c.send_with(4, &opts).unwrap();
    let ids = c.recv().unwrap();
    assert_eq!(ids.width, 10);
    let d = c.describe().unwrap();
    for raw in ids.iter() {
        let f = d.id_from_bytes(raw).unwrap().decode().unwrap();
        assert_eq!(f.int("meta"), Some(0x2a));
    }
}

#[test]
fn a_closed_client_says_so() {
    let s = Server::start(&["--layout", "lable64"]);
    let c = Client::builder()
        .socket(&s.socket)
        .prefetch(100)
        .build()
        .unwrap();
    assert!(c.next_id().is_ok());
    c.close();
    assert!(matches!(c.next_id(), Err(Error::Closed)));
}

#[test]
fn prefetched_ids_older_than_the_maximum_age_are_dropped() {
    let s = Server::start(&["--layout", "lable64"]);
    let c = Client::builder()
        .socket(&s.socket)
        .prefetch(100)
        .max_age(Duration::from_millis(200))
        .build()
        .unwrap();
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let issued = |c: &Client| {
        c.next_id()
            .unwrap()
            .decode()
            .unwrap()
            .int("timestamp_ms")
            .unwrap()
    };
    issued(&c);
    std::thread::sleep(Duration::from_millis(600));
    // Everything buffered before the pause is too old now: the next ID was issued within the
    // maximum age (200 ms) of being handed out, plus scheduling slack.
    let asked = now_ms();
    let age = asked - issued(&c);
    assert!(age <= 350, "an ID issued {age} ms before it was handed out");
}

#[test]
fn a_pooled_connection_the_server_closed_is_replaced_at_once() {
    // The server closes connections idle for 1 s; a restart closes them all.
    let mut s = Server::start(&["--layout", "lable64", "--idle-timeout", "1s"]);
    let c = Client::builder()
        .socket(&s.socket)
        .retry_deadline(Duration::ZERO)
        .build()
        .unwrap();
    c.next_id().unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    let start = Instant::now();
    c.next_id()
        .expect("a new connection, with no retry deadline to spend");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    s.restart();
    c.next_id().expect("a new connection after the restart");
}

/// A fake idcar that issues 8-byte counter IDs and records the most connections open at once.
fn counting_server() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("count.sock");
    let l = UnixListener::bind(&path).unwrap();
    let most = Arc::new(AtomicUsize::new(0));
    let (open, next) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicU64::new(1)));
    let m = Arc::clone(&most);
    std::thread::spawn(move || {
        for s in l.incoming().take(64) {
            let Ok(mut s) = s else { return };
            let (open, next, most) = (Arc::clone(&open), Arc::clone(&next), Arc::clone(&m));
            most.fetch_max(open.fetch_add(1, SeqCst) + 1, SeqCst);
            std::thread::spawn(move || {
                let mut head = [0u8; 4];
                while s.read_exact(&mut head).is_ok() {
                    let mut out = Vec::new();
                    if head[1] == 2 {
                        out = describe_answer();
                    } else {
                        let mut count = [0u8; 4];
                        if s.read_exact(&mut count).is_err() {
                            break;
                        }
                        let n = u32::from_be_bytes(count);
                        out.extend_from_slice(&[0xd1, 0, 8, 0]);
                        out.extend_from_slice(&(n * 8).to_be_bytes());
                        let first = next.fetch_add(u64::from(n), SeqCst);
                        for v in first..first + u64::from(n) {
                            // Reserved bits (10..16) stay zero: valid lable64 IDs.
                            out.extend_from_slice(&(v << 16).to_be_bytes());
                        }
                    }
                    if s.write_all(&out).is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, SeqCst);
            });
        }
    });
    (dir, path, most)
}

#[test]
fn concurrent_calls_share_at_most_the_configured_connections() {
    let (_dir, socket, most) = counting_server();
    let c = Client::builder()
        .socket(&socket)
        .connections(2)
        .build()
        .unwrap();
    let all: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..12)
            .map(|_| {
                let c = &c;
                scope.spawn(move || (0..200).map(|_| c.next_u64().unwrap()).collect::<Vec<_>>())
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 2_400);
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=2).contains(&most),
        "{most} connections open at once, for at most 2"
    );
}

#[test]
fn closing_a_client_in_use_ends_every_call() {
    let s = Server::start(&["--layout", "sno80"]);
    let c = Client::builder()
        .socket(&s.socket)
        .prefetch(100)
        .connections(2)
        .build()
        .unwrap();
    let start = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..6)
            .map(|_| {
                let c = &c;
                scope.spawn(move || {
                    // Until the client is closed; bounded all the same.
                    for _ in 0..1_000_000 {
                        match c.ids(7) {
                            Ok(ids) => assert_eq!(ids.len(), 7),
                            Err(Error::Closed) => return,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    panic!("never closed");
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        c.close();
        for w in workers {
            w.join().unwrap();
        }
    });
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(matches!(c.next_id(), Err(Error::Closed)));
}
