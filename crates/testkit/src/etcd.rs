//! Real etcd members for tests, started on free loopback ports in fresh temporary directories,
//! killed on drop: the newest supported release unless a test names another (`Etcd<Older>`, see
//! `release.rs`), built from its Go modules into the store cache (`etcd/lib.sh`).
#![allow(dead_code)]

use crate::release::{Newest, Release};
use crate::repo;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The path of `name` (`etcd`, `etcdctl`) of release `R`'s build, as `etcd/lib.sh` finds it
/// (asked once per process); panics, saying how to build it, when it is not there.
fn bin<R: Release>(name: &'static str) -> PathBuf {
    static BINS: OnceLock<Mutex<HashMap<(&str, &str), PathBuf>>> = OnceLock::new();
    let bins = BINS.get_or_init(Default::default);
    if let Some(path) = bins.lock().unwrap().get(&(R::WHICH, name)) {
        return path.clone();
    }
    let lib = repo().join("etcd/lib.sh").display().to_string();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(". {lib} && etcd_bin \"$1\" \"$2\""))
        .args(["etcd-test", name, R::WHICH])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim_end());
    bins.lock().unwrap().insert((R::WHICH, name), path.clone());
    path
}

pub struct Member {
    pub name: String,
    pub dir: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
    child: Option<Child>,
}

/// One member or a cluster, of release `R`.
pub struct Etcd<R: Release = Newest> {
    tmp: tempfile::TempDir,
    pub members: Vec<Member>,
    token: String,
    /// Certificates from `zk/tls-certs.sh` when started with [`Etcd::tls`]: `ca.pem`,
    /// `server.pem`/`server-key.pem` (IP 127.0.0.1), `client.pem`/`client-key.pem` (CN=idcar).
    pub certs: Option<PathBuf>,
    /// With TLS: whether a client certificate is required (and its CN is the etcd user).
    client_cert_auth: bool,
    release: PhantomData<R>,
}

impl Etcd {
    pub fn single() -> Etcd {
        Self::new(1)
    }

    pub fn cluster(n: usize) -> Etcd {
        Self::new(n)
    }

    /// One member over TLS; `client_cert_auth`: client certificates required (etcd's
    /// `--client-cert-auth`, with `--trusted-ca-file`); else TLS without client certificates.
    pub fn tls(client_cert_auth: bool) -> Etcd {
        let tmp = tempfile::tempdir().unwrap();
        let certs = tmp.path().join("certs");
        crate::certs(&certs);
        Self::start_in(tmp, 1, Some(certs), client_cert_auth)
    }
}

impl<R: Release> Etcd<R> {
    /// `n` members of release `R`.
    pub fn new(n: usize) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), n, None, false)
    }

    fn start_in(tmp: tempfile::TempDir, n: usize, certs: Option<PathBuf>, cca: bool) -> Self {
        let mut e = Etcd {
            token: format!("idcar-test-{}", tmp.path().display()),
            tmp,
            members: Vec::new(),
            certs,
            client_cert_auth: cca,
            release: PhantomData,
        };
        // A port chosen free may be taken by another test before a member binds it: then the
        // members start again on other ports, in directories of their own.
        for attempt in 0..3 {
            e.choose_ports(n, attempt);
            for i in 0..n {
                e.launch(i);
            }
            match (0..n).try_for_each(|i| e.wait_healthy(i, Duration::from_secs(60))) {
                Ok(()) => return e,
                Err(err) if err.contains("another process") && attempt < 2 => {
                    for i in 0..n {
                        e.kill(i);
                    }
                }
                Err(err) => {
                    let logs: Vec<String> = (0..n)
                        .map(|k| format!("--- member {k}:\n{}", e.log_tail(k)))
                        .collect();
                    panic!("etcd ({} release): {err}\n{}", R::WHICH, logs.join("\n"));
                }
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// New members on ports free now (every one held until all are chosen, so no two members
    /// share one), in directories of attempt `attempt`.
    fn choose_ports(&mut self, n: usize, attempt: usize) {
        let held: Vec<std::net::TcpListener> = (0..2 * n)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let port = |k: usize| held[k].local_addr().unwrap().port();
        let base = match attempt {
            0 => self.tmp.path().to_path_buf(),
            a => self.tmp.path().join(format!("again{a}")),
        };
        self.members = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                dir: base.join(format!("m{i}")),
                client_port: port(2 * i),
                peer_port: port(2 * i + 1),
                child: None,
            })
            .collect();
    }

    fn scheme(&self) -> &'static str {
        if self.certs.is_some() {
            "https"
        } else {
            "http"
        }
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn launch(&mut self, i: usize) {
        let cluster = self.initial_cluster();
        let scheme = self.scheme();
        let m = &self.members[i];
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::File::create(self.tmp.path().join(format!("{}.log", m.name))).unwrap();
        let mut c = Command::new(bin::<R>("etcd"));
        c.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--auto-compaction-mode", "revision"])
            .args(["--auto-compaction-retention", "1000"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(certs) = &self.certs {
            c.arg("--cert-file")
                .arg(certs.join("server.crt"))
                .arg("--key-file")
                .arg(certs.join("server-key.pem"));
            if self.client_cert_auth {
                c.arg("--trusted-ca-file")
                    .arg(certs.join("ca.pem"))
                    .arg("--client-cert-auth");
            }
        }
        let child = c.spawn().expect("etcd runs");
        self.members[i].child = Some(child);
    }

    /// `etcdctl` against member `i` with the harness's certificates.
    pub fn etcdctl(&self, i: usize, args: &[&str]) -> Result<String, String> {
        self.etcdctl_as(i, None, args)
    }

    /// `etcdctl` against member `i` as `user` (`name:password`).
    pub fn etcdctl_as(
        &self,
        i: usize,
        user: Option<&str>,
        args: &[&str],
    ) -> Result<String, String> {
        let m = &self.members[i];
        let mut c = Command::new(bin::<R>("etcdctl"));
        c.arg(format!(
            "--endpoints={}://127.0.0.1:{}",
            self.scheme(),
            m.client_port
        ))
        .args(["--command-timeout=2s", "--dial-timeout=1s"]);
        if let Some(certs) = &self.certs {
            c.arg(format!("--cacert={}", certs.join("ca.pem").display()));
            if self.client_cert_auth {
                c.arg(format!("--cert={}", certs.join("client.pem").display()))
                    .arg(format!("--key={}", certs.join("client-key.pem").display()));
            }
        }
        if let Some(u) = user {
            c.arg(format!("--user={u}"));
        }
        let out = c.args(args).output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "etcdctl {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn wait_healthy(&self, i: usize, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let port = self.members[i].client_port;
        loop {
            match self.etcdctl(i, &["endpoint", "health"]) {
                Ok(_) => match self.pid(i) {
                    Some(pid) if !crate::listens(pid, port) => {
                        return Err(format!(
                            "etcd member {i}'s port {port} is answered by another process"
                        ))
                    }
                    _ => return Ok(()),
                },
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("etcd member {i} not healthy: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    pub fn log_tail(&self, i: usize) -> String {
        let log = self
            .tmp
            .path()
            .join(format!("{}.log", self.members[i].name));
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `host:port,...` (or `https://host:port,...`) of every member.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| match self.certs {
                Some(_) => format!("https://127.0.0.1:{}", m.client_port),
                None => format!("127.0.0.1:{}", m.client_port),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The process ids of the running members.
    pub fn pids(&self) -> Vec<i32> {
        (0..self.members.len())
            .filter_map(|i| self.pid(i))
            .collect()
    }

    fn pid(&self, i: usize) -> Option<i32> {
        self.members[i].child.as_ref().map(|c| c.id() as i32)
    }

    fn signal(&self, i: usize, sig: Signal) {
        if let Some(pid) = self.pid(i) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// kill -9, and wait until it is gone.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn pause(&self, i: usize) {
        self.signal(i, Signal::SIGSTOP);
    }

    pub fn resume(&self, i: usize) {
        self.signal(i, Signal::SIGCONT);
    }

    /// Starts a killed member again on its ports and data directory (it rejoins).
    pub fn restart(&mut self, i: usize) {
        self.launch(i);
    }

    /// Waits until member `i` answers again.
    pub fn wait_up(&self, i: usize, limit: Duration) {
        self.wait_healthy(i, limit)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.log_tail(i)));
    }

    /// The index of the member that leads, if a running one says so.
    pub fn leader(&self) -> Option<usize> {
        for i in 0..self.members.len() {
            if self.members[i].child.is_none() {
                continue;
            }
            let Ok(out) = self.etcdctl(i, &["endpoint", "status", "-w", "json"]) else {
                continue;
            };
            let v: serde_json::Value = match serde_json::from_str(&out) {
                Ok(v) => v,
                Err(_) => continue,
            };
            let s = &v[0]["Status"];
            if s["header"]["member_id"].as_u64().is_some()
                && s["header"]["member_id"] == s["leader"]
            {
                return Some(i);
            }
        }
        None
    }

    /// Moves the leadership to member `i` (bounded wait until it leads).
    pub fn make_leader(&self, i: usize) {
        let id = |m: usize| -> u64 {
            let out = self
                .etcdctl(m, &["endpoint", "status", "-w", "json"])
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v[0]["Status"]["header"]["member_id"].as_u64().unwrap()
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match self.leader() {
                Some(l) if l == i => return,
                Some(l) => {
                    let _ = self.etcdctl(l, &["move-leader", &format!("{:x}", id(i))]);
                }
                None => {}
            }
            assert!(
                Instant::now() < deadline,
                "member {i} never became the leader"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs `etcdctl` against member `i` as `user` with `stdin` as its input.
    pub fn etcdctl_input(&self, i: usize, user: &str, args: &[&str], stdin: &str) {
        use std::io::Write;
        let mut c = Command::new(bin::<R>("etcdctl"))
            .arg(format!(
                "--endpoints=127.0.0.1:{}",
                self.members[i].client_port
            ))
            .arg(format!("--user={user}"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A client of the test's own for every member.
    /// The member that process `pid` has an established connection to (from `ss`).
    pub fn connected_member(&self, pid: u32) -> Option<usize> {
        let out = std::process::Command::new("ss")
            .args(["-tnpH", "state", "established"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .filter(|l| l.contains(&format!("pid={pid},")))
            .filter_map(|l| {
                l.split_whitespace()
                    .nth(3)?
                    .rsplit(':')
                    .next()?
                    .parse::<u16>()
                    .ok()
            })
            .find_map(|port| self.members.iter().position(|m| m.client_port == port))
    }
}

impl<R: Release> Drop for Etcd<R> {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.signal(i, Signal::SIGCONT);
            self.kill(i);
        }
    }
}
