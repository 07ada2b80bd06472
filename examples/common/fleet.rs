//! Real idcar processes for a benchmark: started on a store under a root of their own, each
//! with its own socket and admin port, asked over their admin listener whether they serve and
//! what their metrics say, stopped with SIGTERM or killed with -9.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One running instance.
pub struct Instance {
    pub child: Child,
    pub admin: u16,
    pub started: Instant,
    pub log: PathBuf,
}

/// An instance still running when the benchmark ends (or fails) is killed with it.
impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How instances are started: the binary, the store, the root they share, extra flags.
pub struct Fleet {
    pub idcar: PathBuf,
    /// The store's flag and its value (`--zk CONNECT` or `--etcd ENDPOINTS`), and the flag of
    /// its root (`--zk-root` or `--etcd-prefix`).
    pub store: [String; 3],
    pub root: String,
    pub extra: Vec<String>,
    /// Where the instances' sockets and logs are.
    pub dir: PathBuf,
    /// The temporary directory `dir` is, unless the logs are kept.
    _tmp: Option<tempfile::TempDir>,
}

impl Fleet {
    /// For ZooKeeper at `zk`, or etcd at `etcd` when given, or Lease objects through the API
    /// server of `kubeconfig` when given; sockets and logs in `keep` (kept afterwards) or a
    /// temporary directory.
    pub fn new(
        idcar: PathBuf,
        zk: &str,
        etcd: Option<&str>,
        kubeconfig: Option<&str>,
        extra: &[String],
        keep: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let store = match (etcd, kubeconfig) {
            (_, Some(k)) => ["--kubeconfig", k, "--kube-prefix"],
            (Some(e), None) => ["--etcd", e, "--etcd-prefix"],
            (None, None) => ["--zk", zk, "--zk-root"],
        };
        let mut extra = extra.to_vec();
        if kubeconfig.is_some() {
            extra.insert(0, "--kube".to_string());
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let (dir, tmp) = match keep {
            Some(d) => {
                std::fs::create_dir_all(&d)?;
                (d, None)
            }
            None => {
                let t = tempfile::tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        Ok(Fleet {
            idcar,
            store: store.map(String::from),
            root: match kubeconfig {
                Some(_) => format!("idcar-fleet-{stamp}"),
                None => format!("/idcar-fleet/{stamp}"),
            },
            extra,
            dir,
            _tmp: tmp,
        })
    }

    /// Starts an instance in pool `cluster` with `flags` (then the fleet's extra flags).
    pub fn spawn<S: AsRef<std::ffi::OsStr>>(
        &mut self,
        cluster: u8,
        flags: &[S],
    ) -> anyhow::Result<Instance> {
        let admin = free_port()?;
        let socket = self.dir.join(format!("{admin}.sock"));
        let log_path = self.dir.join(format!("{admin}.log"));
        let log = std::fs::File::create(&log_path)?;
        let [flag, target, root_flag] = &self.store;
        let child = Command::new(&self.idcar)
            .args(["serve", flag, target, root_flag, &self.root])
            .args(["--cluster-id", &cluster.to_string()])
            .args(["--socket", &socket.to_string_lossy()])
            .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
            .args(flags)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Instance {
            child,
            admin,
            started: Instant::now(),
            log: log_path,
        })
    }
}

/// A loopback port free now: the kernel's pick (fixed ports collide with the ephemeral ports
/// of the fleet's own connections to the store).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// An admin GET: status and body (`None` when nothing answers).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Some((status, body))
}

pub fn ready(i: &Instance) -> bool {
    matches!(get(i.admin, "/readyz"), Some((200, _)))
}

/// The last lines of an instance's log, to say why it does not serve.
fn log_tail(i: &Instance) -> String {
    let log = std::fs::read_to_string(&i.log).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!("instance on admin port {}:\n{}", i.admin, tail.join("\n"))
}

/// Waits until every instance of `set` serves: each one's start-to-serving time.
pub fn wait_all(set: &[&Instance], limit: Duration) -> anyhow::Result<Vec<Duration>> {
    let deadline = Instant::now() + limit;
    let mut took: Vec<Option<Duration>> = vec![None; set.len()];
    while took.iter().any(Option::is_none) {
        if Instant::now() >= deadline {
            let late: Vec<String> = set
                .iter()
                .zip(&took)
                .filter(|(_, t)| t.is_none())
                .map(|(i, _)| log_tail(i))
                .collect();
            anyhow::bail!(
                "{} of {} not serving after {limit:?}\n{}",
                late.len(),
                set.len(),
                late.join("\n")
            );
        }
        for (i, inst) in set.iter().enumerate() {
            if took[i].is_none() && ready(inst) {
                took[i] = Some(inst.started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(took.into_iter().flatten().collect())
}

/// A metric's value from an instance's /metrics: the first sample named `name` whose line
/// holds `with` (a label such as `result="ok"`; "" for any).
pub fn metric(i: &Instance, name: &str, with: &str) -> Option<f64> {
    let (_, body) = get(i.admin, "/metrics")?;
    body.lines()
        .find(|l| {
            l.starts_with(name) && l[name.len()..].starts_with([' ', '{']) && l.contains(with)
        })?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

/// Mark writes an instance has made (its own count of renewals that went through).
pub fn mark_writes(i: &Instance) -> Option<f64> {
    metric(i, "idcar_lease_renewals_total", "result=\"ok\"")
}

/// Whether the instance's log says its time mark reaches `reach` (`idle`, `full`, `short`).
pub fn logged_reach(i: &Instance, reach: &str) -> bool {
    let log = std::fs::read_to_string(&i.log).unwrap_or_default();
    let quoted = format!("reach=\"{reach}\"");
    let bare = format!("reach={reach} ");
    log.lines()
        .any(|l| l.contains("lease_record") && (l.contains(&quoted) || l.contains(&bare)))
}

pub fn sigterm(i: &Instance) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
}

pub fn stop(mut i: Instance) {
    sigterm(&i);
    let _ = i.child.wait();
}

pub fn kill9(mut i: Instance) {
    let _ = i.child.kill();
    let _ = i.child.wait();
}

/// The `p` quantile of `v` (sorted in place).
pub fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    match v.len() {
        0 => Duration::ZERO,
        n => v[((n - 1) as f64 * p).round() as usize],
    }
}
