//! The Kubernetes API server of `--store kubernetes`: the pinned kube-apiserver
//! (`kube/ensure-kube.sh` builds it into the store cache) in the first store node's network
//! namespace, as on a control-plane node, over TLS with a throwaway CA, service-account keys and
//! RBAC on, its objects in the campaign's three etcd members. The sidecars reach it on that
//! node's bridge address as the service account `idcar` of namespace `idcar`, bound by the
//! shipped Role (deploy/kubernetes/kube/rbac.yaml); the operator's faults act as an
//! administrator.

use super::ensemble::{alive, kill_and_reap, stopped};
use crate::net::Host;
use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Its port on the node's bridge address.
const PORT: u16 = 6443;

/// The namespace of the pools' Lease objects.
pub const NAMESPACE: &str = "idcar";

/// The kube-apiserver and its files.
pub struct ApiServer {
    host: Host,
    dir: PathBuf,
    /// `--etcd-servers`.
    etcd: String,
    pid: Option<i32>,
}

/// The pinned release's binaries in the store cache (`kube/lib.sh`'s `kube_home`), found once.
fn bin() -> Result<&'static Path> {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    if let Some(bin) = BIN.get() {
        return Ok(bin);
    }
    let bin = super::from_lib("kube/lib.sh", "kube_home")?.join("bin");
    if !bin.join("kube-apiserver").exists() {
        bail!(
            "{} not built: run kube/ensure-kube.sh (tests/ensure-deps.sh does)",
            bin.join("kube-apiserver").display()
        );
    }
    Ok(BIN.get_or_init(|| bin))
}

/// Runs `cmd` and fails with its stderr.
fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl ApiServer {
    /// Its certificates, keys and administrator under `dir`; started on `host` with `etcd`
    /// (`--etcd-servers`, whose members are up), ready, with namespace [`NAMESPACE`], the
    /// shipped Role and the sidecars' kubeconfig.
    pub fn start(host: &Host, etcd: String, dir: &Path) -> Result<ApiServer> {
        std::fs::create_dir_all(dir)?;
        let repo = super::workspace();
        let token = format!("{:032x}", rand::random::<u128>());
        let san = format!("IP:{},IP:127.0.0.1", host.addr);
        idcar_testkit::kube::server_files(dir, &san, &token).map_err(anyhow::Error::msg)?;
        let mut s = ApiServer {
            host: host.clone(),
            dir: dir.to_path_buf(),
            etcd,
            pid: None,
        };
        s.write_kubeconfig(&s.admin(), &token, "default")?;
        s.launch()?;
        s.wait_ready(Duration::from_secs(120))?;
        s.kubectl(&["create", "namespace", NAMESPACE])?;
        let rbac = repo.join("deploy/kubernetes/kube/rbac.yaml");
        s.kubectl(&["apply", "-n", NAMESPACE, "-f", &rbac.display().to_string()])?;
        let sa = s.kubectl(&[
            "create",
            "token",
            "idcar",
            "-n",
            NAMESPACE,
            "--duration",
            "48h",
        ])?;
        s.write_kubeconfig(&s.sidecars(), sa.trim(), NAMESPACE)?;
        Ok(s)
    }

    /// The administrator's kubeconfig (the operator's faults, the probe).
    pub fn admin(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The sidecars' kubeconfig: the service account `idcar` of [`NAMESPACE`].
    pub fn sidecars(&self) -> PathBuf {
        self.dir.join("idcar.kubeconfig")
    }

    fn write_kubeconfig(&self, path: &Path, token: &str, namespace: &str) -> Result<()> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: campaign\n  cluster:\n    server: https://{}:{PORT}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: campaign\n  context: {{cluster: campaign, user: user, namespace: {namespace}}}\ncurrent-context: campaign\n",
            self.host.addr,
            self.dir.join("certs/ca.pem").display()
        );
        Ok(std::fs::write(path, text)?)
    }

    /// kubectl as the administrator, inside the server's namespace: its output.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        run(
            Command::new("ip")
                .args(["netns", "exec", &self.host.ns, "timeout", "30"])
                .arg(bin()?.join("kubectl"))
                .arg("--kubeconfig")
                .arg(self.admin())
                .args(["--request-timeout", "20s"])
                .args(args),
            &format!("kubectl {}", args.join(" ")),
        )
    }

    /// Starts it (in the background: it answers once its etcd does).
    pub fn launch(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("apiserver.log"))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.host.ns])
            .arg(bin()?.join("kube-apiserver"))
            .current_dir(&self.dir)
            .args(idcar_testkit::kube::flags(
                &self.host.addr,
                PORT,
                &self.etcd,
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot run kube-apiserver")?;
        // `ip netns exec` execs the server: the child is the server itself. Reaped by `kill`.
        self.pid = Some(child.id() as i32);
        std::mem::forget(child);
        Ok(())
    }

    /// Waits (bounded by `limit`) until `/readyz` says ok.
    fn wait_ready(&mut self, limit: Duration) -> Result<()> {
        let until = Instant::now() + limit;
        let mut last = String::new();
        while Instant::now() < until {
            if !self.pid.is_some_and(alive) {
                bail!(
                    "kube-apiserver exited: see {}",
                    self.dir.join("apiserver.log").display()
                );
            }
            match self.kubectl(&["get", "--raw", "/readyz"]) {
                Ok(out) if out.trim() == "ok" => return Ok(()),
                Ok(out) => last = out,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        bail!("kube-apiserver not ready within {limit:?}: {last}")
    }

    pub fn is_up(&self) -> bool {
        self.pid.is_some()
    }

    /// kill -9, and wait (bounded) until it is gone.
    pub fn kill(&mut self) {
        if let Some(pid) = self.pid.take() {
            kill_and_reap(pid);
        }
    }

    /// SIGSTOP freezes it, SIGCONT thaws it.
    pub fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    /// Whether it is stopped (or not running).
    pub fn stopped(&self) -> bool {
        self.pid.is_none_or(stopped)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.kill();
    }
}
