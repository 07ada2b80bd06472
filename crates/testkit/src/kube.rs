//! A real Kubernetes API server for tests: the `kube-apiserver` of the pinned release
//! (`kube/lib.sh`, built by `kube/ensure-kube.sh` into the store cache) on a free loopback port,
//! over TLS with a throwaway CA, service-account signing keys and RBAC on, its objects in an
//! etcd member of the harness's own ([`crate::etcd::Etcd`]); killed on drop.
//!
//! The harness reaches it as an administrator (a static token of group `system:masters`);
//! idcar reaches it as a service account bound by the Role shipped in
//! `deploy/kubernetes/kube/rbac.yaml` ([`ApiServer::namespace`]), with a token from the
//! TokenRequest API — as a pod would.

use crate::etcd::Etcd;
use crate::{repo, run_tool};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ADMIN_TOKEN: &str = "idcar-test-admin";

/// The directory of the pinned release's build (`kube/lib.sh`), asked once per process;
/// panics, saying how to build it, when it is not there.
pub fn home() -> PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let lib = repo().join("kube/lib.sh").display().to_string();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(". {lib} && kube_home"))
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let home = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim_end());
        assert!(
            home.join("bin/kube-apiserver").is_file() && home.join("bin/kubectl").is_file(),
            "{} is not built: run kube/ensure-kube.sh (tests/ensure-deps.sh does)",
            home.display()
        );
        home
    })
    .clone()
}

/// kubectl of the pinned release.
pub fn kubectl_bin() -> PathBuf {
    home().join("bin/kubectl")
}

/// The files an API server of [`flags`] reads, written to `dir`: a throwaway CA and the
/// server's certificate for `san` (`certs/`), service-account signing keys (`sa.key`,
/// `sa.pub`), and the administrator's static token (`tokens.csv`, group `system:masters`).
pub fn server_files(dir: &Path, san: &str, admin_token: &str) -> Result<(), String> {
    crate::certs_for(&dir.join("certs"), san)?;
    for args in [
        &["genrsa", "-out", "sa.key", "2048"][..],
        &["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"][..],
    ] {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {}: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    std::fs::write(
        dir.join("tokens.csv"),
        format!("{admin_token},admin,admin-uid,system:masters\n"),
    )
    .map_err(|e| format!("tokens.csv: {e}"))
}

/// kube-apiserver's flags, run in the directory of [`server_files`]: on `addr:port` over TLS,
/// RBAC on, its objects in `etcd` (`--etcd-servers`).
pub fn flags(addr: &str, port: u16, etcd: &str) -> Vec<String> {
    let port = port.to_string();
    [
        "--etcd-servers",
        etcd,
        "--bind-address",
        addr,
        "--advertise-address",
        addr,
        "--secure-port",
        &port,
        "--tls-cert-file",
        "certs/server.crt",
        "--tls-private-key-file",
        "certs/server-key.pem",
        "--client-ca-file",
        "certs/ca.pem",
        "--token-auth-file",
        "tokens.csv",
        "--authorization-mode",
        "RBAC",
        "--service-account-issuer",
        "https://kubernetes.default.svc",
        "--service-account-key-file",
        "sa.pub",
        "--service-account-signing-key-file",
        "sa.key",
        "--service-cluster-ip-range",
        "10.96.0.0/24",
        "--endpoint-reconciler-type",
        "none",
        "--cert-dir",
        "generated",
        "--profiling=false",
        "--v=1",
    ]
    .map(String::from)
    .to_vec()
}

/// One API server and its etcd.
pub struct ApiServer {
    tmp: tempfile::TempDir,
    pub etcd: Etcd,
    pub port: u16,
    child: Option<Child>,
}

impl ApiServer {
    /// Starts one and waits until it is ready (its bootstrap RBAC roles in place).
    pub fn start() -> ApiServer {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        server_files(dir, "IP:127.0.0.1,DNS:localhost", ADMIN_TOKEN)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut s = ApiServer {
            tmp,
            etcd: Etcd::single(),
            port: 0,
            child: None,
        };
        // A port chosen free may be taken before the server binds it: then another.
        for attempt in 0..3 {
            s.port = crate::free_port();
            s.write_kubeconfig(
                "admin.kubeconfig",
                &format!("token: {ADMIN_TOKEN}"),
                "default",
            );
            s.launch();
            match s.wait_ready(Duration::from_secs(90)) {
                Ok(()) => return s,
                Err(e) if attempt < 2 && e.contains("another process") => s.kill(),
                Err(e) => panic!("kube-apiserver: {e}\n{}", s.log_tail()),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn launch(&mut self) {
        let dir = self.tmp.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("apiserver.log"))
            .unwrap();
        let etcd = format!("http://{}", self.etcd.endpoints());
        let child = Command::new(home().join("bin/kube-apiserver"))
            .current_dir(dir)
            .args(flags("127.0.0.1", self.port, &etcd))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("kube-apiserver runs");
        self.child = Some(child);
    }

    /// Waits until `/readyz` answers ok.
    pub fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(match self.log_tail().contains("address already in use") {
                    true => format!("port {} was taken by another process", self.port),
                    false => format!("it exited ({status})"),
                });
            }
            match self.kubectl(&["get", "--raw", "/readyz"]) {
                Ok(out) if out.trim() == "ok" => return Ok(()),
                Ok(out) | Err(out) => last = out,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(format!("not ready within {limit:?}: {last}"))
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The CA that signed the server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.tmp.path().join("certs/ca.pem")
    }

    /// The administrator's kubeconfig.
    pub fn admin(&self) -> PathBuf {
        self.tmp.path().join("admin.kubeconfig")
    }

    /// Writes a kubeconfig `file` for this server with `user` (a kubeconfig user's body) in
    /// `namespace`.
    fn write_kubeconfig(&self, file: &str, user: &str, namespace: &str) -> PathBuf {
        let path = self.tmp.path().join(file);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    {user}\ncontexts:\n- name: test\n  context: {{cluster: test, user: user, namespace: {namespace}}}\ncurrent-context: test\n",
            self.url(),
            self.ca().display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// kubectl as the administrator: its output, or what went wrong.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        let (ok, out) = run_tool(
            Command::new(kubectl_bin())
                .arg("--kubeconfig")
                .arg(self.admin())
                .args(["--request-timeout", "20s"])
                .args(args),
            Duration::from_secs(30),
        );
        if ok {
            Ok(out)
        } else {
            Err(out)
        }
    }

    /// kubectl as the administrator, which must succeed.
    pub fn must(&self, args: &[&str]) -> String {
        self.kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
    }

    /// A namespace `ns` with the service account and Role of deploy/kubernetes/kube/rbac.yaml:
    /// the kubeconfig of that service account (a token from the TokenRequest API), as idcar in
    /// a pod of `ns` would reach the server.
    pub fn namespace(&self, ns: &str) -> PathBuf {
        self.must(&["create", "namespace", ns]);
        let rbac = repo().join("deploy/kubernetes/kube/rbac.yaml");
        self.must(&["apply", "-n", ns, "-f", &rbac.display().to_string()]);
        self.service_account(ns, "idcar")
    }

    /// The kubeconfig of service account `sa` of `ns` (which must exist), in `ns`.
    pub fn service_account(&self, ns: &str, sa: &str) -> PathBuf {
        let token = self.must(&["create", "token", sa, "-n", ns, "--duration", "24h"]);
        let file = format!("{ns}-{sa}.kubeconfig");
        self.write_kubeconfig(&file, &format!("token: {}", token.trim()), ns)
    }

    /// A kubeconfig in `ns` whose user the server does not know (a token it did not sign).
    pub fn stranger(&self, ns: &str) -> PathBuf {
        self.write_kubeconfig("stranger.kubeconfig", "token: not-a-token", ns)
    }

    /// kill -9, and wait until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (after [`ApiServer::kill`]) and waits until ready.
    pub fn restart(&mut self) {
        self.launch();
        self.wait_ready(Duration::from_secs(90))
            .unwrap_or_else(|e| panic!("kube-apiserver again: {e}\n{}", self.log_tail()));
    }

    /// SIGSTOP / SIGCONT.
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text =
            std::fs::read_to_string(self.tmp.path().join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Where its files are.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }
}

/// The processes of the shared server, killed when the test process exits.
static SHARED_PIDS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

extern "C" fn kill_shared() {
    if let Ok(pids) = SHARED_PIDS.lock() {
        for &pid in pids.iter() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl ApiServer {
    /// One server shared by every test of the process that asks (each in a namespace of its
    /// own: [`ApiServer::namespace`]), started at the first ask and killed when the process
    /// exits. Tests that stop or cut the server start their own ([`ApiServer::start`]).
    pub fn shared() -> &'static ApiServer {
        static SHARED: OnceLock<ApiServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            let s = ApiServer::start();
            let mut pids = SHARED_PIDS.lock().unwrap();
            pids.extend(s.pid());
            pids.extend(s.etcd.pids());
            // SAFETY: registers a plain function that only sends signals.
            unsafe { nix::libc::atexit(kill_shared) };
            s
        })
    }

    /// A namespace of its own for one test (`ns-<n>`), with the Role: its service account's
    /// kubeconfig and the namespace's name.
    pub fn fresh_namespace(&self) -> (PathBuf, String) {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = format!("t{}-{n}", std::process::id());
        (self.namespace(&ns), ns)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.kill();
    }
}
