//! The etcd lease's TLS and authentication against a real etcd: mutual TLS with a client
//! certificate (whose common name is the etcd user under `--client-cert-auth`), errors that
//! name the flag to fix, and a user and password from `--etcd-auth-file` with etcd's
//! authentication on — a wrong password waits (not ready) for the right one, and a user
//! without permission on the prefix is refused, never an ID issued.

mod common;

use common::etcd::{start, Etcd};
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

fn tls_flags(dir: &Path, with_cert: bool) -> Vec<String> {
    let mut v = vec!["--etcd-tls-ca".to_string(), file(dir, "ca.pem")];
    if with_cert {
        v.extend([
            "--etcd-tls-cert".to_string(),
            file(dir, "client.pem"),
            "--etcd-tls-key".to_string(),
            file(dir, "client-key.pem"),
        ]);
    }
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Waits until /readyz is 503 with a reason containing `says`.
async fn not_ready_saying(i: &Idcar, says: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = i.admin_get("/readyz").await;
        if status == 503 && body.contains(says) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "readyz {status} {body:?}, expected one saying {says:?}: {}",
            i.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Mutual TLS: idcar claims and serves over TLS with its client certificate, `pool` reads
/// the pool over TLS; without a client certificate, or trusting another CA, it stays not ready
/// with a reason that names the flag; a plaintext endpoint with TLS flags is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_serves_and_its_errors_name_the_flag() {
    let e = Etcd::tls(true);
    let certs = e.certs.clone().unwrap();
    let mut a = start(&e.endpoints(), &strs(&tls_flags(&certs, true))).await;
    a.wait_ready(Duration::from_secs(15)).await;
    assert_eq!(a.take(100).await.unwrap().len(), 100);
    let endpoints = e.endpoints();
    let mut args = vec!["pool", "--etcd", &endpoints];
    let flags = tls_flags(&certs, true);
    args.extend(strs(&flags));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1/64 slots held"), "{out}");

    // No client certificate where etcd asks for one.
    let b = start(&e.endpoints(), &strs(&tls_flags(&certs, false))).await;
    let why = not_ready_saying(&b, "--etcd-tls-cert").await;
    assert!(b.take(1).await.is_err(), "{why}");

    // Trusting another CA.
    let other = tempfile::tempdir().unwrap();
    let script = format!("{}/zk/tls-certs.sh", env!("CARGO_MANIFEST_DIR"));
    assert!(Command::new("bash")
        .arg(&script)
        .arg(other.path())
        .output()
        .unwrap()
        .status
        .success());
    let c = start(&e.endpoints(), &strs(&tls_flags(other.path(), true))).await;
    not_ready_saying(&c, "not signed by --etcd-tls-ca").await;

    // TLS flags with a plaintext endpoint: refused at start, never a plaintext fallback.
    let plain = e.endpoints().replace("https://", "http://");
    let mut args = vec![
        "serve",
        "--admin-addr",
        "none",
        "--socket",
        "/nonexistent/s",
        "--etcd",
        &plain,
    ];
    let flags = tls_flags(&certs, true);
    args.extend(strs(&flags));
    let (code, _, err) = run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("never falls back to plaintext"), "{err}");
    a.stop_ok().await;
}

/// etcd's authentication: `--etcd-auth-file` with a wrong password is not ready (saying so,
/// the password nowhere in logs or metrics) until the file holds the right one; a user
/// without permission on the prefix is refused; an anonymous client reads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_from_a_file_and_the_permissions_it_grants() {
    let e = Etcd::single();
    let root = Some("root:rootpw");
    for cmd in [&["user", "add", "root:rootpw"][..], &["auth", "enable"]] {
        e.etcdctl(0, cmd).unwrap();
    }
    for cmd in [
        &["role", "add", "idcar"][..],
        &[
            "role",
            "grant-permission",
            "idcar",
            "--prefix=true",
            "readwrite",
            "/idcar/",
        ],
        &["user", "add", "idcar:s3cret-pw"],
        &["user", "grant-role", "idcar", "idcar"],
        &["user", "add", "nobody:nobody-pw"],
    ] {
        e.etcdctl_as(0, root, cmd).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("etcd-auth");
    std::fs::write(&pw, "idcar:wrong-pw\n").unwrap();
    let pw_s = pw.to_str().unwrap();
    let mut a = start(&e.endpoints(), &["--etcd-auth-file", pw_s]).await;
    let why = not_ready_saying(&a, "authentication failed").await;
    assert!(why.contains("--etcd-auth-file"), "{why}");
    std::fs::write(&pw, "idcar:s3cret-pw\n").unwrap();
    a.wait_ready(Duration::from_secs(20)).await;
    assert_eq!(a.take(50).await.unwrap().len(), 50);
    let (_, metrics) = a.admin_get("/metrics").await;
    for text in [a.logs(), metrics] {
        assert!(!text.contains("s3cret-pw") && !text.contains("wrong-pw"));
    }
    // The password rotated in etcd and in the file while running: the next token is
    // fetched with the new one (or, refused meanwhile, a new etcd lease is): IDs again.
    std::fs::write(&pw, "idcar:n3w-s3cret\n").unwrap();
    e.etcdctl_input(
        0,
        "root:rootpw",
        &["user", "passwd", "idcar", "--interactive=false"],
        "n3w-s3cret\n",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if a.admin_get("/readyz").await.0 == 200 && a.take(5).await.is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no IDs after the rotation: {}",
            a.logs()
        );
    }
    assert!(!a.logs().contains("n3w-s3cret"));
    // Nothing for anonymous clients.
    let anon = e.etcdctl(0, &["get", "--prefix", "/idcar/"]);
    assert!(anon.is_err(), "{anon:?}");

    // A user etcd knows, without permission on /idcar/: refused, not ready, no ID.
    let other = dir.path().join("nobody");
    std::fs::write(&other, "nobody:nobody-pw\n").unwrap();
    let b = start(
        &e.endpoints(),
        &[
            "--etcd-auth-file",
            other.to_str().unwrap(),
            "--cluster-id",
            "3",
        ],
    )
    .await;
    not_ready_saying(&b, "permission denied").await;
    assert!(b.take(1).await.is_err());
    a.stop_ok().await;
}

/// Under `--client-cert-auth` the certificate's common name is the etcd user: the client
/// certificate alone (CN=idcar, granted the role) is enough with authentication on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificates_common_name_is_the_etcd_user() {
    let e = Etcd::tls(true);
    let certs = e.certs.clone().unwrap();
    for cmd in [
        &["user", "add", "root:rootpw"][..],
        &["role", "add", "idcar"],
        &[
            "role",
            "grant-permission",
            "idcar",
            "--prefix=true",
            "readwrite",
            "/idcar/",
        ],
        &["user", "add", "idcar:unused-pw"],
        &["user", "grant-role", "idcar", "idcar"],
        &["auth", "enable"],
    ] {
        e.etcdctl(0, cmd).unwrap();
    }
    let mut a = start(&e.endpoints(), &strs(&tls_flags(&certs, true))).await;
    a.wait_ready(Duration::from_secs(15)).await;
    assert_eq!(a.take(10).await.unwrap().len(), 10);
    a.stop_ok().await;
}
