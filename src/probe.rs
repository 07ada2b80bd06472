//! `idcar probe`: asks a running idcar's admin listener whether it is ready (`/readyz`) or
//! alive (`/healthz`), for Kubernetes exec probes and Docker/compose healthchecks. It finds the
//! listener through the same `--admin-addr`/`IDCAR_ADMIN_ADDR` as `serve`, so a probe inherits
//! the container's configuration, and it never consumes an ID. Blocking std I/O with
//! deadlines: a probe needs no runtime.

use crate::config::ProbeConfig;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Where to reach a listener bound to `addr`: an unspecified address (`0.0.0.0`, `::`) is
/// reached on loopback.
pub fn target(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// GETs `path` from `addr` within `timeout`: the status code and the body's first line.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"))
    };
    let mut s = TcpStream::connect_timeout(&addr, left()?)?;
    s.set_write_timeout(Some(left()?))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: idcar\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left()?))?;
        match s.read(&mut buf)? {
            0 => break,
            n if reply.len() + n > 64 * 1024 => {
                return Err(std::io::Error::other("answer too large for a probe"))
            }
            n => reply.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&reply);
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.lines().next().unwrap_or("").trim().to_string()))
}

/// Runs `idcar probe`: exit 0 when ready (or alive), 1 when not or unreachable, with a
/// one-line reason on stdout.
pub fn run(cfg: &ProbeConfig) -> ExitCode {
    // What idcar's admin listener answers (the body's first line): `ok` or `ready` when all
    // is well, `not ready: <why>` (503) when not.
    let (path, what, yes) = if cfg.live {
        ("/healthz", "alive", "ok")
    } else {
        ("/readyz", "ready", "ready")
    };
    let to = target(cfg.admin);
    match get(to, path, cfg.timeout) {
        Ok((200, body)) if body == yes => {
            println!("{what}");
            ExitCode::SUCCESS
        }
        Ok((503, body)) if body.starts_with("not ready: ") => {
            let reason = &body["not ready: ".len()..];
            println!("not {what}: {reason} (HTTP 503 from {to})");
            ExitCode::FAILURE
        }
        Ok((status, body)) => {
            let said = if body.is_empty() {
                String::new()
            } else {
                format!(", {:?}", body.chars().take(80).collect::<String>())
            };
            println!(
                "not {what}: the listener at {to} is not idcar's admin listener (it answered \
                 {path} with HTTP {status}{said}); check --admin-addr/IDCAR_ADMIN_ADDR"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            println!(
                "not {what}: cannot reach idcar's admin listener at {to} \
                 (--admin-addr/IDCAR_ADMIN_ADDR): {e}"
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_reached_on_loopback() {
        assert_eq!(
            target("0.0.0.0:9750".parse().unwrap()),
            "127.0.0.1:9750".parse().unwrap()
        );
        assert_eq!(
            target("[::]:9750".parse().unwrap()),
            "[::1]:9750".parse().unwrap()
        );
        assert_eq!(
            target("10.1.2.3:9750".parse().unwrap()),
            "10.1.2.3:9750".parse().unwrap()
        );
    }

    #[test]
    fn a_silent_listener_times_out() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let started = Instant::now();
        let e = get(
            l.local_addr().unwrap(),
            "/readyz",
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{e}");
    }
}
