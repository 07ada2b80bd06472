//! Real ZooKeeper servers for tests, started through the project's own `zk/lib.sh` on free
//! loopback ports in fresh temporary directories, killed on drop; the newest supported release
//! unless a test names another (`Zk<Older>`, see `release.rs`).
#![allow(dead_code)]

use crate::release::{Newest, Release};
use crate::{free_port, repo};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn lib() -> String {
    repo().join("zk/lib.sh").display().to_string()
}

/// Runs a `zk/lib.sh` function for release `R`.
fn bash<R: Release>(script: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(". {} && {script}", lib()))
        .arg("zk-test")
        .args(args)
        .env("ZK_VERSION", R::WHICH)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub struct Server {
    pub dir: PathBuf,
    pub port: u16,
    pub pid: Option<i32>,
}

/// A standalone server or an ensemble, of release `R`.
pub struct Zk<R: Release = Newest> {
    _tmp: tempfile::TempDir,
    pub servers: Vec<Server>,
    /// The TLS port of a standalone server started with [`Zk::tls`].
    pub tls: Option<Tls>,
    release: PhantomData<R>,
}

/// A server's TLS client port and the certificates made for it by `zk/tls-certs.sh`:
/// `ca.pem`, `server.pem`, `client.pem` + `client-key.pem` (CN=idcar).
pub struct Tls {
    pub port: u16,
    pub certs: PathBuf,
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 is the state; a zombie is dead for our purposes.
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

impl Zk {
    pub fn standalone() -> Zk {
        Self::new(1)
    }

    pub fn ensemble() -> Zk {
        Self::new(3)
    }

    /// A standalone server with a TLS client port beside its plaintext one (Netty, PEM
    /// certificates made by `zk/tls-certs.sh`, client certificates mapped to `x509`
    /// identities); `client_auth`: ZooKeeper's `ssl.clientAuth` (`need`, `want`, `none`).
    pub fn tls(client_auth: &str) -> Zk {
        Self::start(1, Some((client_auth, "IP:127.0.0.1,DNS:localhost", 825)))
    }

    /// As [`Zk::tls`], with a server certificate for `san` (its subjectAltName) only, valid
    /// for `days` (0: expired a second after it is made).
    pub fn tls_for(client_auth: &str, san: &str, days: u32) -> Zk {
        Self::start(1, Some((client_auth, san, days)))
    }
}

impl<R: Release> Zk<R> {
    /// `n` servers of release `R`: a standalone one (1) or an ensemble.
    pub fn new(n: usize) -> Self {
        Self::start(n, None)
    }

    fn start(n: usize, tls: Option<(&str, &str, u32)>) -> Self {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(n, tls) {
                Ok(zk) => return zk,
                Err(e) => last = e, // most likely a port taken meanwhile: new ports
            }
        }
        panic!(
            "ZooKeeper ({} release) did not start (run tests/ensure-deps.sh): {last}",
            R::WHICH
        );
    }

    fn try_start(n: usize, tls: Option<(&str, &str, u32)>) -> Result<Self, String> {
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
        let tls = match tls {
            None => None,
            Some((auth, san, days)) => {
                let certs = tmp.path().join("certs");
                let script = repo().join("zk/tls-certs.sh");
                let out = Command::new("bash")
                    .arg(script)
                    .arg(&certs)
                    .env("SERVER_SAN", san)
                    .env("SERVER_DAYS", days.to_string())
                    .output()
                    .map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(String::from_utf8_lossy(&out.stderr).into_owned());
                }
                Some((
                    Tls {
                        port: free_port(),
                        certs,
                    },
                    auth.to_string(),
                ))
            }
        };
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let servers_cfg = if n > 1 {
            ports
                .iter()
                .enumerate()
                .map(|(i, (_, q, e))| format!("server.{}=127.0.0.1:{q}:{e}\n", i + 1))
                .collect()
        } else {
            String::new()
        };
        let mut zk = Zk {
            servers: Vec::new(),
            _tmp: tmp,
            tls: None,
            release: PhantomData,
        };
        for (i, (port, _, _)) in ports.iter().enumerate() {
            let dir = zk._tmp.path().join(format!("{}", i + 1));
            let d = dir.to_str().unwrap().to_string();
            bash::<R>(
                "zk_write_conf \"$1\" \"$2\" \"$3\"",
                &[&d, &port.to_string(), &servers_cfg],
            )?;
            if n > 1 {
                std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1))
                    .map_err(|e| e.to_string())?;
            }
            if let Some((t, auth)) = &tls {
                bash::<R>(
                    "zk_tls_conf \"$1\" \"$2\" \"$3\" \"$4\"",
                    &[
                        &d,
                        &t.port.to_string(),
                        t.certs.to_str().unwrap(),
                        auth.as_str(),
                    ],
                )?;
            }
            zk.servers.push(Server {
                dir,
                port: *port,
                pid: None,
            });
        }
        for i in 0..n {
            zk.launch(i)?;
        }
        for i in 0..n {
            zk.wait_serving(i)?;
        }
        zk.tls = tls.map(|(t, _)| t);
        Ok(zk)
    }

    fn launch(&mut self, i: usize) -> Result<(), String> {
        let d = self.servers[i].dir.to_str().unwrap().to_string();
        bash::<R>("zk_start \"$1\"", &[&d])?;
        let pid = std::fs::read_to_string(self.servers[i].dir.join("pid"))
            .map_err(|e| e.to_string())?
            .trim()
            .parse()
            .map_err(|e| format!("{e}"))?;
        self.servers[i].pid = Some(pid);
        Ok(())
    }

    fn wait_serving(&self, i: usize) -> Result<String, String> {
        let port = self.servers[i].port;
        let mode = bash::<R>("zk_wait \"$1\" 30", &[&port.to_string()]).map_err(|e| {
            let log = std::fs::read_to_string(self.servers[i].dir.join("zookeeper.log"))
                .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            format!(
                "{e}\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })?;
        match self.servers[i].pid {
            Some(pid) if !crate::listens(pid, port) => Err(format!(
                "port {port} is answered by another server than ours (another test's?)"
            )),
            _ => Ok(mode),
        }
    }

    /// `host:port,...` for every server.
    pub fn connect(&self) -> String {
        self.servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn signal(&self, i: usize, sig: Signal) {
        if let Some(pid) = self.servers[i].pid {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// kill -9, and wait (bounded) until it is gone.
    /// A ZooKeeper client of the test's own, connected to every server.
    pub async fn client(&self) -> zookeeper_client::Client {
        client(&self.connect()).await
    }

    pub fn kill(&mut self, i: usize) {
        self.signal(i, Signal::SIGKILL);
        if let Some(pid) = self.servers[i].pid.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    pub fn pause(&self, i: usize) {
        self.signal(i, Signal::SIGSTOP);
    }

    pub fn resume(&self, i: usize) {
        self.signal(i, Signal::SIGCONT);
    }

    /// Starts a killed server again on the same port and data directory.
    pub fn restart(&mut self, i: usize) {
        self.launch(i).expect("restart");
        self.wait_serving(i).expect("restarted server serves");
    }

    /// The index of the ensemble's leader, if one answers.
    pub fn leader(&self) -> Option<usize> {
        (0..self.servers.len()).find(|&i| {
            self.servers[i].pid.is_some()
                && bash::<R>("zk_wait \"$1\" 1", &[&self.servers[i].port.to_string()])
                    .is_ok_and(|out| out.contains("Mode: leader"))
        })
    }

    pub fn dir(&self, i: usize) -> &Path {
        &self.servers[i].dir
    }
}

impl<R: Release> Drop for Zk<R> {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.signal(i, Signal::SIGCONT);
            self.signal(i, Signal::SIGKILL);
        }
    }
}

/// A ZooKeeper client of the test's own for `connect`, connected within 30 s (a server just
/// started or restarted may take a moment to serve).
pub async fn client(connect: &str) -> zookeeper_client::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(5))
            .with_connection_timeout(Duration::from_secs(1))
            .connect(connect)
            .await;
        match c {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("cannot connect to {connect}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
