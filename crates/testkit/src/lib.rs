//! The stores idcar's tests run against, for real: ZooKeeper servers and etcd members started
//! on free loopback ports in fresh temporary directories from the releases the store cache
//! holds (`tests/ensure-deps.sh` makes them), killed on drop; a loopback proxy that can cut
//! or black-hole a connection; and the two supported releases of each store as a type
//! parameter. Nothing here knows idcar's own types: the server's tests and the lease crate's
//! store suites add what runs idcar against these stores.
#![allow(dead_code)]

pub mod etcd;
pub mod kube;
pub mod proxy;
pub mod release;
pub mod zk;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether process `pid` holds the socket listening on TCP `port` (IPv4 or IPv6): a server
/// that answers on its port may be another test's that took the port first (a port is free
/// only until someone binds it), and a test must never share another's store.
pub fn listens(pid: i32, port: u16) -> bool {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    let local_port = cols.get(1)?.rsplit(':').next()?;
                    let listening = *cols.get(3)? == "0A";
                    let inode = cols.get(9)?;
                    (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                        .then(|| format!("socket:[{inode}]"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|link| inodes.iter().any(|i| link.to_string_lossy() == i.as_str()))
}

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .expect("the repository's root")
}

/// A throwaway certificate authority and certificates in `dir` (`zk/tls-certs.sh`): `ca.pem`,
/// the server's for 127.0.0.1 and localhost (`server.pem`, `server.crt`, `server-key.pem`), a
/// client's with CN=idcar (`client.pem`, `client-key.pem`).
pub fn certs(dir: &std::path::Path) {
    certs_for(dir, "IP:127.0.0.1,DNS:localhost").unwrap_or_else(|e| panic!("{e}"));
}

/// [`certs`] with the server's certificate for `san` (`IP:10.0.0.1,DNS:name,...`).
pub fn certs_for(dir: &std::path::Path, san: &str) -> Result<(), String> {
    let out = Command::new("bash")
        .arg(repo().join("zk/tls-certs.sh"))
        .arg(dir)
        .env("SERVER_SAN", san)
        .output()
        .map_err(|e| format!("bash: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "zk/tls-certs.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// A tool the tests need: from the test venv (`target/test-tools/venv/bin`) or the PATH.
/// Missing tools fail the test with what to run: they are never skipped.
pub fn tool(name: &str) -> PathBuf {
    let venv = repo().join("target/test-tools/venv/bin").join(name);
    if venv.exists() {
        return venv;
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("{name} is missing: run `bash tests/ensure-deps.sh` (it installs the test tools)")
    })
}

/// Runs `cmd` to completion (bounded by `limit`): (success, stdout + stderr).
/// The tool runs in a process group of its own: on a time-out the whole group is killed (a
/// suite's servers and test processes with it), not only the tool.
pub fn run_tool(cmd: &mut Command, limit: Duration) -> (bool, String) {
    // Output goes to files, not pipes: a chatty tool cannot block on a full pipe.
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            panic!("{cmd:?} did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default()
        + &std::fs::read_to_string(&err).unwrap_or_default();
    (status.success(), text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listener_is_known_by_its_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id() as i32;
        assert!(super::listens(me, port));
        drop(l);
        assert!(!super::listens(me, port));
    }
}
