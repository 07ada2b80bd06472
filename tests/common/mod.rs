//! Test harness: runs the real `idcar` binary in a temporary directory and talks to it.
#![allow(dead_code)]

pub mod etcd;
pub mod kube;
pub mod store;
pub mod zk;

#[allow(unused_imports)]
pub use idcar_testkit::{free_port, now_ms, proxy, release, repo, run_tool, tool};

use idcar::client::HttpClient;
use idcar_client::tokio::Connection as BinaryClient;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_idcar");

/// Adds `--idle-horizon` equal to the test's `--lease-horizon` (the harnesses' 2 s unless
/// given) unless `extra` sets one: the mark then follows the window, renewed every interval as
/// while someone waits for a slot — most tests are about renewals.
pub fn idle_like_horizon(extra: &[&str], v: &mut Vec<String>) {
    if !extra.contains(&"--idle-horizon") {
        let horizon = extra
            .iter()
            .position(|f| *f == "--lease-horizon")
            .and_then(|i| extra.get(i + 1))
            .unwrap_or(&"2s");
        v.push("--idle-horizon".into());
        v.push(horizon.to_string());
    }
}

/// `serve` arguments: `lead` first, then each of `defaults` the test's `extra` does not name,
/// the idle horizon ([`idle_like_horizon`]), then `extra` itself.
pub fn with_defaults(lead: &[&str], defaults: &[(&str, &str)], extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = lead.iter().map(|s| s.to_string()).collect();
    for (flag, value) in defaults {
        if !extra.contains(flag) {
            v.push(flag.to_string());
            v.push(value.to_string());
        }
    }
    idle_like_horizon(extra, &mut v);
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A running `idcar serve`, killed on drop if still running.
pub struct Idcar {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub admin: String,
    pub log: PathBuf,
}

/// Builds the command for `idcar serve` in `dir` with extra arguments.
pub fn serve_cmd(dir: &Path, admin: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("serve")
        .arg("--socket")
        .arg(dir.join("idcar.sock"))
        .arg("--state-file")
        .arg(dir.join("state.json"))
        .arg("--admin-addr")
        .arg(admin)
        .args(extra)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("idcar.log")).unwrap());
    c
}

impl Idcar {
    /// Starts idcar and waits (at most 10 s) until its socket accepts connections.
    pub async fn start(extra: &[&str]) -> Idcar {
        Self::start_in(tempfile::tempdir().unwrap(), extra).await
    }

    pub async fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Idcar {
        Self::launch(dir, extra, None).await
    }

    /// Starts idcar through `bash -c '<shell>; exec idcar serve ...'`, e.g. `ulimit -n 256`
    /// or `umask 000`.
    pub async fn start_under(shell: &str, extra: &[&str]) -> Idcar {
        Self::launch(tempfile::tempdir().unwrap(), extra, Some(shell)).await
    }

    /// Starts idcar expecting it may refuse to run: returns once its socket accepts
    /// connections or it has exited (see [`Idcar::wait_exit`]).
    pub async fn start_or_exit(extra: &[&str]) -> Idcar {
        Self::launch_as(tempfile::tempdir().unwrap(), extra, None, true).await
    }

    /// [`Idcar::start_or_exit`] through `bash -c '<shell>; exec idcar serve ...'`.
    pub async fn start_or_exit_under(shell: &str, extra: &[&str]) -> Idcar {
        Self::launch_as(tempfile::tempdir().unwrap(), extra, Some(shell), true).await
    }

    async fn launch(dir: tempfile::TempDir, extra: &[&str], shell: Option<&str>) -> Idcar {
        Self::launch_as(dir, extra, shell, false).await
    }

    async fn launch_as(
        dir: tempfile::TempDir,
        extra: &[&str],
        shell: Option<&str>,
        may_exit: bool,
    ) -> Idcar {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut cmd = serve_cmd(dir.path(), &admin, extra);
        if let Some(shell) = shell {
            let mut wrapped = Command::new("bash");
            wrapped
                .arg("-c")
                .arg(format!("{shell} && exec \"$0\" \"$@\""))
                .arg(cmd.get_program())
                .args(cmd.get_args())
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("idcar.log")).unwrap());
            cmd = wrapped;
        }
        let child = cmd.spawn().expect("idcar starts");
        let i = Idcar {
            child,
            socket: dir.path().join("idcar.sock"),
            state: dir.path().join("state.json"),
            log: dir.path().join("idcar.log"),
            admin,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut i = i;
        while tokio::net::UnixStream::connect(&i.socket).await.is_err() {
            if let Ok(Some(st)) = i.child.try_wait() {
                if may_exit {
                    // `try_wait` keeps the status for `wait_exit`.
                    return i;
                }
                panic!(
                    "idcar exited ({st:?}) before opening its socket: {}",
                    i.logs()
                );
            }
            assert!(
                Instant::now() < deadline,
                "idcar did not open its socket: {}",
                i.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        i
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn http(&self) -> HttpClient {
        HttpClient::connect(&self.socket).await.unwrap()
    }

    pub async fn binary(&self) -> BinaryClient {
        BinaryClient::connect(&self.socket).await.unwrap()
    }

    /// GET on the admin listener: (status, body).
    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&self.admin).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
            .await
            .expect("admin answers")
            .unwrap();
        let status = out[9..12].parse().unwrap();
        let body = out
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// The value of the first sample matching `query` in /metrics: a metric name, with the
    /// labels it must carry (others may be there too), e.g. `x{a="b"}`.
    pub async fn metric(&self, query: &str) -> Option<f64> {
        let (_, body) = self.admin_get("/metrics").await;
        let (name, want) = parse_sample(query)?;
        body.lines()
            .find(|l| {
                parse_sample(l)
                    .is_some_and(|(n, labels)| n == name && want.iter().all(|w| labels.contains(w)))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// The sum of every sample of `name`, whatever its labels.
    pub async fn metric_sum(&self, name: &str) -> f64 {
        let (_, body) = self.admin_get("/metrics").await;
        body.lines()
            .filter(|l| parse_sample(l).is_some_and(|(n, _)| n == name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits (at most `limit`) until `cond` holds for the value of `metric` (an exact sample
    /// name with labels, as in [`Idcar::metric`]); returns the last value seen.
    pub async fn wait_metric(
        &self,
        metric: &str,
        limit: Duration,
        cond: impl Fn(f64) -> bool,
    ) -> f64 {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.metric(metric).await.unwrap_or(f64::NAN);
            if cond(v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{metric} = {v} after {limit:?}: {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Resident memory of the process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// Takes `n` IDs (binary protocol, one request) as u64s.
    pub async fn take(&self, n: u32) -> Result<Vec<u64>, idcar_client::Error> {
        let mut b = self.binary().await;
        let ids = b.ids(n).await?;
        Ok(ids
            .iter()
            .map(|id| u64::from_be_bytes(id.try_into().unwrap()))
            .collect())
    }

    /// Waits (at most `limit`) until /readyz answers 200.
    pub async fn wait_ready(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.admin_get("/readyz").await.0 == 200 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not ready in {limit:?}: {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits (at most `limit`) for the process to exit.
    /// Waits (bounded) for the process to exit: its exit status and its log.
    pub async fn exit_and_logs(&mut self, limit: Duration) -> (ExitStatus, String) {
        let st = self.wait_exit(limit).await;
        (st, self.logs())
    }

    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "idcar did not exit in {limit:?}: {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERM, then wait for a clean exit.
    pub async fn stop(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait_exit(Duration::from_secs(20)).await
    }

    /// SIGTERM, and assert a clean exit (showing idcar's log when not).
    pub async fn stop_ok(&mut self) {
        let st = self.stop().await;
        assert!(
            st.success(),
            "idcar exited with {st:?}; its log:\n{}",
            self.logs()
        );
    }

    /// The stored mark for `key` in the state file.
    pub fn stored_mark(&self, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(&self.state).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["marks"][key].as_u64()
    }
}

impl Drop for Idcar {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Writes a state file holding `mark` for `key`.
pub fn write_state(path: &Path, key: &str, mark: u64) {
    let v = serde_json::json!({"version": 1, "marks": {key: mark}});
    std::fs::write(path, v.to_string()).unwrap();
}

/// Runs `idcar` with `args` to completion (bounded): (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Raises this test process's soft descriptor limit to its hard limit (tests that open
/// thousands of connections).
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if hard > soft {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    hard.max(soft)
}

/// The name and labels of a sample line in the Prometheus text format (`None` for comments
/// and blank lines). Label values here never hold commas or quotes.
pub fn parse_sample(line: &str) -> Option<(&str, Vec<(String, String)>)> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let mut labels = Vec::new();
    if line[end..].starts_with('{') {
        let close = line.rfind('}')?;
        for pair in line[end + 1..close].split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=')?;
            labels.push((k.to_string(), v.trim_matches('"').to_string()));
        }
    }
    Some((&line[..end], labels))
}

/// Asks `idcar` for IDs (binary protocol, 10 a request, a pause of 5 ms between requests)
/// until `until` passes: the IDs, and how many requests were refused (reconnecting after
/// each). Bounded by `until`.
/// A socket that cannot be connected to (the process has exited) counts as refused too.
pub async fn hammer(idcar: &Idcar, until: Instant) -> (Vec<u64>, usize) {
    let mut ids = Vec::new();
    let mut refused = 0;
    let mut b = BinaryClient::connect(&idcar.socket).await.ok();
    while Instant::now() < until {
        let got = match b.as_mut() {
            Some(c) => c.ids(10).await.ok(),
            None => None,
        };
        match got {
            Some(got) => ids.extend(
                got.iter()
                    .map(|id| u64::from_be_bytes(id.try_into().unwrap())),
            ),
            None => {
                refused += 1;
                b = BinaryClient::connect(&idcar.socket).await.ok();
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (ids, refused)
}

/// Fails on the first ID seen twice.
pub fn assert_unique(all: &[u64]) {
    let mut seen = std::collections::HashSet::with_capacity(all.len());
    for id in all {
        assert!(seen.insert(id), "duplicate ID {id:016x}");
    }
}

/// Waits (bounded) until `idcar`'s `/readyz` body satisfies `f`: the body.
pub async fn readyz_until(
    idcar: &Idcar,
    limit: std::time::Duration,
    f: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let (_, body) = idcar.admin_get("/readyz").await;
        if f(&body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "readyz: {body}\n{}",
            idcar.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
