//! The store's nodes: a ZooKeeper ensemble (through `zk/lib.sh`) or an etcd cluster, each node
//! in its own network namespace, started, killed and restarted by the nemesis; with
//! `--store kubernetes`, an etcd cluster and a Kubernetes API server on the first node's host
//! ([`ApiServer`]).

use super::apiserver::ApiServer;
use crate::net::Host;
use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The ZooKeeper client port inside every ZooKeeper namespace.
const ZK_PORT: u16 = 2181;
/// etcd's client and peer ports inside every etcd namespace.
const ETCD_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;

/// The store the pool lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    Zookeeper,
    Etcd,
    /// Lease objects through a Kubernetes API server whose objects are in an etcd cluster.
    Kubernetes,
}

/// The directory of the newest supported etcd release's `etcd` and `etcdctl`, as `etcd/lib.sh`
/// finds them in the store cache (`tests/ensure-deps.sh` builds them); found once.
fn etcd_dir() -> Result<&'static Path> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    if let Some(dir) = DIR.get() {
        return Ok(dir);
    }
    let etcd = super::from_lib("etcd/lib.sh", "etcd_bin etcd")?;
    let dir = etcd.parent().context("etcd's directory")?.to_path_buf();
    Ok(DIR.get_or_init(|| dir))
}

/// Runs `etcdctl` against the member in namespace `ns` (bounded to a second or two).
fn etcdctl(ns: &str, args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "timeout", "3"])
        .arg(etcd_dir()?.join("etcdctl"))
        .arg(format!("--endpoints=127.0.0.1:{ETCD_PORT}"))
        .args(["--dial-timeout=1s", "--command-timeout=1s"])
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        bail!(
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `zk/lib.sh` in the workspace (starting, configuring and probing ZooKeeper).
fn lib_sh() -> PathBuf {
    super::workspace().join("zk/lib.sh")
}

/// Runs a `zk/lib.sh` function inside namespace `ns`; its stdout.
fn zk_lib(ns: &str, script: &str, args: &[&str]) -> Result<String> {
    let full = format!(". \"{}\" && {script}", lib_sh().display());
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "bash", "-c", &full, "zk"])
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        bail!(
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `pid` still runs (a zombie left for init to reap does not).
pub(super) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// One node of the store: a ZooKeeper server or an etcd member.
pub struct ZkNode {
    pub host: Host,
    dir: PathBuf,
    pid: Option<i32>,
}

/// SIGKILLs `pid` and waits (bounded) until it is gone, reaping it if it is our child.
pub(super) fn kill_and_reap(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    let until = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < until {
        let _ = nix::sys::wait::waitpid(
            Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `pid` is stopped (SIGSTOP delivered: its state in `/proc` is `T`) or gone.
pub(super) fn stopped(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // `pid (comm) S ...`: the state follows the last ')'.
    stat.rsplit_once(')')
        .is_none_or(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
}

/// A 3-node (or n-node) ZooKeeper ensemble or etcd cluster.
pub struct Ensemble {
    pub store: Store,
    pub nodes: Vec<ZkNode>,
    /// etcd's `--initial-cluster` (every member's peer URL).
    initial_cluster: String,
    /// Kubernetes: the API server on the first node's host. It shares the fate of the whole
    /// store: killed once no member runs, started again once every member does, stopped and
    /// continued with the first node.
    api: Option<ApiServer>,
}

impl Ensemble {
    /// Starts the store's nodes on `hosts`, their data under `dir`.
    pub fn start(store: Store, hosts: &[Host], dir: &Path) -> Result<Ensemble> {
        match store {
            Store::Zookeeper => Self::start_zk(hosts, dir),
            Store::Etcd => Self::start_etcd(hosts, dir),
            Store::Kubernetes => {
                let mut e = Self::start_etcd(hosts, dir)?;
                e.store = Store::Kubernetes;
                let members = hosts
                    .iter()
                    .map(|h| format!("http://{}:{ETCD_PORT}", h.addr))
                    .collect::<Vec<_>>()
                    .join(",");
                e.api = Some(ApiServer::start(
                    &hosts[0],
                    members,
                    &dir.join("apiserver"),
                )?);
                Ok(e)
            }
        }
    }

    fn start_etcd(hosts: &[Host], dir: &Path) -> Result<Ensemble> {
        let initial_cluster = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| format!("etcd{}=http://{}:{ETCD_PEER_PORT}", i + 1, h.addr))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| ZkNode {
                host: h.clone(),
                dir: dir.join(format!("etcd{}", i + 1)),
                pid: None,
            })
            .collect();
        let mut e = Ensemble {
            store: Store::Etcd,
            nodes,
            initial_cluster,
            api: None,
        };
        for i in 0..e.nodes.len() {
            e.launch(i)?;
        }
        for n in &e.nodes {
            let until = Instant::now() + Duration::from_secs(60);
            while etcdctl(&n.host.ns, &["endpoint", "health"]).is_err() {
                if Instant::now() > until {
                    bail!("etcd in {} did not start", n.host.ns);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(e)
    }

    fn launch_etcd(&mut self, i: usize) -> Result<()> {
        let n = &mut self.nodes[i];
        std::fs::create_dir_all(&n.dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(n.dir.with_extension("log"))?;
        let (client, peer) = (
            format!("http://{}:{ETCD_PORT}", n.host.addr),
            format!("http://{}:{ETCD_PEER_PORT}", n.host.addr),
        );
        let child = Command::new("ip")
            .args(["netns", "exec", &n.host.ns])
            .arg(etcd_dir()?.join("etcd"))
            .args(["--name", &format!("etcd{}", i + 1)])
            .arg("--data-dir")
            .arg(n.dir.join("data"))
            .args([
                "--listen-client-urls",
                &format!("{client},http://127.0.0.1:{ETCD_PORT}"),
            ])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "idcar-campaign"])
            .args(["--auto-compaction-mode", "revision"])
            .args(["--auto-compaction-retention", "10000"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot run etcd")?;
        // `ip netns exec` execs etcd: the child is etcd itself. Reaped by `kill`.
        n.pid = Some(child.id() as i32);
        std::mem::forget(child);
        Ok(())
    }

    /// Writes each node's configuration under `dir` and starts them all.
    fn start_zk(hosts: &[Host], dir: &Path) -> Result<Ensemble> {
        let servers: String = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| format!("server.{}={}:2888:3888\n", i + 1, h.addr))
            .collect();
        let mut nodes = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            let d = dir.join(format!("zk{}", i + 1));
            std::fs::create_dir_all(&d)?;
            let ds = d.to_str().context("temporary path")?;
            // Clients reach each server on its bridge address; `zk_wait` probes loopback.
            zk_lib(
                &h.ns,
                "zk_write_conf \"$1\" \"$2\" \"$3\" 0.0.0.0",
                &[ds, &ZK_PORT.to_string(), &servers],
            )?;
            std::fs::write(d.join("data/myid"), format!("{}\n", i + 1))?;
            nodes.push(ZkNode {
                host: h.clone(),
                dir: d,
                pid: None,
            });
        }
        let mut e = Ensemble {
            store: Store::Zookeeper,
            nodes,
            initial_cluster: String::new(),
            api: None,
        };
        for i in 0..e.nodes.len() {
            e.launch(i)?;
        }
        for n in &e.nodes {
            zk_lib(&n.host.ns, "zk_wait \"$1\" 60", &[&ZK_PORT.to_string()])
                .with_context(|| format!("ZooKeeper in {} did not start", n.host.ns))?;
        }
        Ok(e)
    }

    /// What the sidecars are given to reach the store: `addr:port,...` of every server, or
    /// with Kubernetes their kubeconfig.
    pub fn connect(&self) -> String {
        if let Some(api) = &self.api {
            return api.sidecars().display().to_string();
        }
        self.operator()
    }

    /// What an operator reaches the store with: `addr:port,...` of every server, or with
    /// Kubernetes the administrator's kubeconfig.
    pub fn operator(&self) -> String {
        if let Some(api) = &self.api {
            return api.admin().display().to_string();
        }
        let port = match self.store {
            Store::Zookeeper => ZK_PORT,
            Store::Etcd | Store::Kubernetes => ETCD_PORT,
        };
        self.nodes
            .iter()
            .map(|n| format!("{}:{port}", n.host.addr))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts node `i` (in the background; it joins the ensemble by itself).
    pub fn launch(&mut self, i: usize) -> Result<()> {
        if self.store == Store::Kubernetes {
            self.launch_etcd(i)?;
            let all = (0..self.nodes.len()).all(|k| self.is_up(k));
            if let Some(api) = self.api.as_mut().filter(|a| all && !a.is_up()) {
                api.launch()?;
            }
            return Ok(());
        }
        if self.store == Store::Etcd {
            return self.launch_etcd(i);
        }
        let n = &mut self.nodes[i];
        let d = n.dir.to_str().context("temporary path")?;
        zk_lib(&n.host.ns, "zk_start \"$1\"", &[d])?;
        let pid = std::fs::read_to_string(n.dir.join("pid"))?.trim().parse()?;
        n.pid = Some(pid);
        Ok(())
    }

    /// SIGKILLs node `i` and waits (bounded) until it is gone.
    pub fn kill(&mut self, i: usize) {
        if let Some(pid) = self.nodes[i].pid.take() {
            kill_and_reap(pid);
        }
        let none = (0..self.nodes.len()).all(|k| !self.is_up(k));
        if let Some(api) = self.api.as_mut().filter(|_| none) {
            api.kill();
        }
    }

    /// Sends `sig` to node `i` (if it runs): SIGSTOP freezes it, SIGCONT thaws it.
    pub fn signal(&self, i: usize, sig: Signal) {
        if let Some(pid) = self.nodes[i].pid {
            let _ = kill(Pid::from_raw(pid), sig);
        }
        if let Some(api) = self.api.as_ref().filter(|_| i == 0) {
            api.signal(sig);
        }
    }

    /// Whether node `i` is stopped (SIGSTOP delivered: its state in `/proc` is `T`); a node
    /// not running counts as stopped.
    pub fn stopped(&self, i: usize) -> bool {
        let api = self.api.as_ref().filter(|_| i == 0);
        self.nodes[i].pid.is_none_or(stopped) && api.is_none_or(ApiServer::stopped)
    }

    /// etcd (and Kubernetes' etcd) only: compacts the store's history at its current revision (through `etcdctl`,
    /// on a member that is up), as an operator or etcd's own auto-compaction does; what it
    /// did.
    pub fn compact(&self) -> Result<String> {
        if self.store == Store::Zookeeper {
            bail!("only etcd compacts its history");
        }
        let i = (0..self.nodes.len())
            .find(|&i| self.is_up(i))
            .context("no etcd member is up")?;
        let ns = &self.nodes[i].host.ns;
        // A linearizable read says the current revision in its header.
        let read = etcdctl(ns, &["get", "/", "-w", "json"])?;
        let revision = serde_json::from_str::<serde_json::Value>(&read)?["header"]["revision"]
            .as_u64()
            .context("no revision in etcdctl's answer")?;
        etcdctl(ns, &["compaction", &revision.to_string()])?;
        Ok(format!("compacted the history at revision {revision}"))
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.nodes[i].pid.is_some()
    }

    /// Node `i`'s data directory (ZooKeeper's snapshots and log, or etcd's).
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.nodes[i].dir.join("data")
    }

    /// Waits (bounded by `limit`) until a node says it leads.
    pub fn wait_leader(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.leader().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// The index of the node that says it leads (one `srvr` probe each, a second at most).
    pub fn leader(&self) -> Option<usize> {
        if self.store != Store::Zookeeper {
            return (0..self.nodes.len()).find(|&i| {
                self.is_up(i)
                    && etcdctl(
                        &self.nodes[i].host.ns,
                        &["endpoint", "status", "-w", "json"],
                    )
                    .ok()
                    .and_then(|out| serde_json::from_str::<serde_json::Value>(&out).ok())
                    .is_some_and(|v| {
                        let s = &v[0]["Status"];
                        s["leader"].as_u64().is_some() && s["header"]["member_id"] == s["leader"]
                    })
            });
        }
        let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{ZK_PORT} && printf srvr >&3 && cat <&3");
        (0..self.nodes.len()).find(|&i| {
            self.is_up(i)
                && Command::new("ip")
                    .args(["netns", "exec", &self.nodes[i].host.ns])
                    .args(["timeout", "1", "bash", "-c", &probe])
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Mode: leader"))
        })
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        if let Some(api) = self.api.as_mut() {
            api.kill();
        }
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}
