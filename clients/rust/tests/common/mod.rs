//! Real `idcar serve` processes for the tests, from `$IDCAR_BIN` (a test fails, never skips,
//! when it is unset), each in a temporary directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server: `$IDCAR_BIN`, else the newer of this repository's `target/debug/idcar` and
/// `target/release/idcar`; a test fails (never skips) when there is none.
pub fn bin() -> PathBuf {
    if let Some(b) = std::env::var_os("IDCAR_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(b);
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["debug", "release"]
        .iter()
        .map(|p| repo.join("target").join(p).join("idcar"))
        .filter_map(|b| Some((std::fs::metadata(&b).ok()?.modified().ok()?, b)))
        .max()
        .map(|(_, b)| b)
        .unwrap_or_else(|| {
            panic!(
                "no idcar server to test against: build it (cargo build --bin idcar) or set \
                 IDCAR_BIN=/absolute/path/to/idcar"
            )
        })
}

pub struct Server {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    args: Vec<String>,
    issuing: bool,
}

impl Server {
    /// Starts `idcar serve` with `args` and waits (at most 20 s) until it issues IDs.
    pub fn start(args: &[&str]) -> Server {
        Server::start_until(args, true)
    }

    /// Starts a server that will not issue (no store to be had): waits until it answers
    /// describe.
    pub fn start_unready(args: &[&str]) -> Server {
        Server::start_until(args, false)
    }

    fn start_until(args: &[&str], issuing: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let mut s = Server {
            child: None,
            dir,
            socket,
            args: args.iter().map(|a| a.to_string()).collect(),
            issuing,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state-file")
            .arg(self.dir.path().join("state"))
            .args(["--admin-addr", "none", "--log", "warn"])
            .args(&self.args)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin().display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answered =
                idcar_client::Connection::connect(&self.socket, Some(Duration::from_secs(2)))
                    .and_then(|mut c| {
                        c.describe()?;
                        if self.issuing {
                            c.ids(1)?;
                        }
                        Ok(())
                    });
            if answered.is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("idcar serve {:?} exited: {status}", self.args);
            }
            assert!(
                Instant::now() < deadline,
                "idcar serve {:?} did not answer in 20 s",
                self.args
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits (at most 20 s) for the exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("idcar serve did not stop in 20 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts it again on the same socket and state file.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `idcar decode --json` of one ID's text, as JSON.
pub fn decode_json(layout: &str, extra: &[&str], text: &str) -> serde_json::Value {
    let out = Command::new(bin())
        .args(["decode", "--layout", layout, "--json"])
        .args(extra)
        .arg(text)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "idcar decode {layout} {text}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
