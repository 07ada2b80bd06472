//! ZooKeeper over TLS, client certificates and credentials from files, against
//! ZooKeeper (the newest supported release) with its Netty connection factory and certificates
//! made by openssl (`zk/tls-certs.sh`): a claim over TLS; mutual TLS whose x509 identity owns
//! the pool (a client without it can neither read nor write); every error names the flag to
//! fix; a wrong password waits, not ready, until the credential file is fixed; certificates
//! rotated under a held lease are picked up without a restart.

mod common;

use common::zk::{client_with, serve_args, start, Zk};
use common::*;
use idcar::lease::tls::TlsFiles;
use idcar::lease::zk::Access;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use zookeeper_client as zkc;

fn certs(zk: &Zk) -> &Path {
    &zk.tls.as_ref().expect("a TLS server").certs
}

fn tls_connect(zk: &Zk) -> String {
    format!("127.0.0.1:{}", zk.tls.as_ref().unwrap().port)
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// The TLS flags for the certificates in `dir` (with the client certificate when `mutual`).
fn tls_flags(dir: &Path, mutual: bool) -> Vec<String> {
    let mut v = vec!["--zk-tls-ca".to_string(), file(dir, "ca.pem")];
    if mutual {
        v.extend([
            "--zk-tls-cert".to_string(),
            file(dir, "client.pem"),
            "--zk-tls-key".to_string(),
            file(dir, "client-key.pem"),
        ]);
    }
    v
}

/// Signs a client certificate `NAME.pem` (key `NAME-key.pem`, new unless `key` is given)
/// with the CA in `dir`, valid for `days` (0: expired a second from now).
fn sign_client(dir: &Path, name: &str, cn: &str, days: u32, key: Option<&str>) {
    let key = key.map_or_else(|| format!("{name}-key.pem"), str::to_string);
    let script = format!(
        "set -e; cd {dir:?}; [ -f {key} ] || openssl genpkey -algorithm EC -pkeyopt \
         ec_paramgen_curve:P-256 -out {key} 2>/dev/null; openssl req -new -key {key} -subj \
         '/O=idcar test/CN={cn}' 2>/dev/null | openssl x509 -req -CA ca.pem -CAkey ca-key.pem \
         -CAcreateserial -days {days} -sha256 -extfile <(echo extendedKeyUsage=clientAuth) \
         -out {name}.pem 2>/dev/null"
    );
    let ok = Command::new("bash").arg("-c").arg(script).status().unwrap();
    assert!(ok.success(), "openssl could not sign {name}");
}

/// `idcar pool` against `connect` with `extra` flags: (exit code, stdout, stderr).
fn pool(connect: &str, extra: &[String]) -> (i32, String, String) {
    let mut args = vec!["pool", "--zk", connect, "--cluster-id", "0", "--json"];
    args.extend(extra.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    (code, out, format!("{err}\n(idcar {})", args.join(" ")))
}

/// TLS with the CA in `dir` and the client certificate `NAME.pem`/`NAME-key.pem` there.
fn access(dir: &Path, name: &str) -> Access {
    let identity = Some((
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}-key.pem")),
    ));
    Access::new(
        None,
        None,
        Some(TlsFiles {
            ca: dir.join("ca.pem"),
            identity,
        }),
    )
    .unwrap()
}

/// A claim over TLS with the server verified against the CA (no client certificate), and
/// `idcar pool` over TLS shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_over_tls() {
    let zk = Zk::tls("none");
    let connect = tls_connect(&zk);
    let flags = tls_flags(certs(&zk), false);
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut a = start(&connect, &extra).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let ids = a.take(100).await.unwrap();
    assert_eq!(ids.len(), 100);
    let (code, out, err) = pool(&connect, &flags);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("\"pid\": {}", a.child.id())), "{out}");
    a.stop_ok().await;
}

/// Mutual TLS: the znodes idcar creates belong to its certificate's x509 identity. A client
/// without it — plaintext and anonymous, or over TLS with another certificate of the same CA —
/// can neither read the owner records nor create, set or delete anything under the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_gives_the_pool_to_the_certificate() {
    let zk = Zk::tls("want");
    let dir = certs(&zk).to_path_buf();
    let connect = tls_connect(&zk);
    let flags = tls_flags(&dir, true);
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut a = start(&connect, &extra).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let (code, out, err) = pool(&connect, &flags);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("\"pid\": {}", a.child.id())), "{out}");

    let owner = client_with(&connect, &access(&dir, "client"))
        .await
        .unwrap();
    let (acls, _) = owner.get_acl("/idcar/lable64/0/slots").await.unwrap();
    assert!(
        acls.iter()
            .all(|acl| acl.scheme() == "x509" && acl.id().contains("CN=idcar")),
        "{acls:?}"
    );
    let (slots, _) = owner.get_children("/idcar/lable64/0/slots").await.unwrap();
    let slot = format!("/idcar/lable64/0/slots/{}", slots[0]);

    sign_client(&dir, "other", "other", 30, None);
    let other = access(&dir, "other");
    let strangers = [
        (
            "anonymous, plaintext",
            common::zk::client(&zk.connect()).await,
        ),
        (
            "another certificate",
            client_with(&connect, &other).await.unwrap(),
        ),
    ];
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    for (who, c) in &strangers {
        let refused = |r: Result<(), zkc::Error>, what: &str| {
            assert!(matches!(r, Err(zkc::Error::NoAuth)), "{who}: {what}: {r:?}")
        };
        refused(c.get_data(&slot).await.map(|_| ()), "read an owner record");
        refused(
            c.list_children("/idcar/lable64/0/slots").await.map(|_| ()),
            "list the slots",
        );
        refused(
            c.create("/idcar/lable64/0/slots/9", b"x", &persistent)
                .await
                .map(|_| ()),
            "create a slot",
        );
        refused(
            c.create("/idcar/intruder", b"x", &persistent)
                .await
                .map(|_| ()),
            "create under the root",
        );
        refused(
            c.set_data(&slot, b"x", None).await.map(|_| ()),
            "set an owner record",
        );
        refused(c.delete(&slot, None).await, "delete a slot");
    }
    assert!(a.take(10).await.is_ok(), "the holder never noticed");
    a.stop_ok().await;
}

/// Every TLS mistake is an error that names the flag (through `idcar pool`, which tries once);
/// `serve` with a CA that did not sign the server stays not ready, says why, and never exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_errors_name_the_flag() {
    let zk = Zk::tls("need");
    let dir = certs(&zk).to_path_buf();
    let connect = tls_connect(&zk);
    let good = tls_flags(&dir, true);
    let with = |replace: &str, by: &str| -> Vec<String> {
        let mut v = good.clone();
        let i = v.iter().position(|f| f == replace).unwrap();
        v[i + 1] = by.to_string();
        v
    };
    let expect = |(code, _, err): (i32, String, String), code_is: i32, says: &[&str]| {
        assert_eq!(code, code_is, "{err}");
        for s in says {
            assert!(err.contains(s), "expected {s:?} in: {err}");
        }
    };
    assert_eq!(pool(&connect, &good).0, 0);

    let missing = file(&dir, "nope.pem");
    expect(
        pool(&connect, &with("--zk-tls-ca", &missing)),
        2,
        &["--zk-tls-ca", "nope.pem", "cannot read"],
    );
    let key_as_ca = file(&dir, "client-key.pem");
    expect(
        pool(&connect, &with("--zk-tls-ca", &key_as_ca)),
        2,
        &["--zk-tls-ca", "no PEM certificate"],
    );
    let other_ca = tempfile::tempdir().unwrap();
    let status = Command::new("bash")
        .arg(format!("{}/zk/tls-certs.sh", env!("CARGO_MANIFEST_DIR")))
        .arg(other_ca.path())
        .status()
        .unwrap();
    assert!(status.success());
    expect(
        pool(
            &connect,
            &with("--zk-tls-ca", &file(other_ca.path(), "ca.pem")),
        ),
        1,
        &["not signed by --zk-tls-ca"],
    );
    sign_client(&dir, "expired", "idcar", 0, Some("client-key.pem"));
    std::thread::sleep(Duration::from_millis(1_100));
    expect(
        pool(&connect, &with("--zk-tls-cert", &file(&dir, "expired.pem"))),
        2,
        &["--zk-tls-cert", "expired"],
    );
    sign_client(&dir, "stranger", "idcar", 30, None);
    expect(
        pool(
            &connect,
            &with("--zk-tls-key", &file(&dir, "stranger-key.pem")),
        ),
        2,
        &["--zk-tls-key", "does not match", "--zk-tls-cert"],
    );
    // No client certificate where ZooKeeper needs one.
    expect(
        pool(&connect, &tls_flags(&dir, false)),
        1,
        &["client certificate", "--zk-tls-cert"],
    );
    // TLS flags at the plaintext port, and the reverse.
    expect(
        pool(&zk.connect(), &good),
        1,
        &["--zk-tls-ca", "plaintext port"],
    );
    expect(pool(&connect, &[]), 1, &["speaks TLS", "--zk-tls-ca"]);
    // A plaintext entry in a TLS connect string is refused outright.
    expect(
        pool(&format!("tcp://{}", zk.connect()), &good),
        2,
        &["never falls back to plaintext"],
    );

    let bad = with("--zk-tls-ca", &file(other_ca.path(), "ca.pem"));
    serve_with_an_untrusted_ca_is_not_ready(&connect, &bad).await;
}

/// The server's certificate does not name the host in --zk, or has expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_for_another_name_or_expired_is_refused() {
    let zk = Zk::tls_for("none", "DNS:zookeeper.example", 825);
    let flags = tls_flags(certs(&zk), false);
    let (code, _, err) = pool(&tls_connect(&zk), &flags);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("is not for \"127.0.0.1\"") && err.contains("--zk"),
        "{err}"
    );
    let expired = Zk::tls_for("none", "IP:127.0.0.1", 0);
    std::thread::sleep(Duration::from_millis(1_100));
    let flags = tls_flags(certs(&expired), false);
    let (code, _, err) = pool(&tls_connect(&expired), &flags);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("has expired"), "{err}");
}

/// Digest credentials from a file: a wrong password is refused by the ACLs, not ready (the
/// reason names --zk-auth-file) and retried; once the file holds the right one the instance
/// becomes ready without a restart. The password shows nowhere: command line, logs, metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_waits_for_the_right_one() {
    let zk = Zk::standalone();
    let tmp = tempfile::tempdir().unwrap();
    let right = tmp.path().join("right");
    let wrong: PathBuf = tmp.path().join("wrong");
    std::fs::write(&right, "idcar:s3cret-right\n").unwrap();
    std::fs::write(&wrong, "idcar:s3cret-wrong\n").unwrap();
    let connect = zk.connect();
    let mut a = start(&connect, &["--zk-auth-file", right.to_str().unwrap()]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut b = start(&connect, &["--zk-auth-file", wrong.to_str().unwrap()]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (status, body) = b.admin_get("/readyz").await;
        assert_ne!(status, 200, "a refused credential never serves");
        if body.contains("--zk-auth-file") || Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        body.contains("refused") && body.contains("--zk-auth-file"),
        "{body}"
    );
    assert!(b.child.try_wait().unwrap().is_none(), "still running");
    std::fs::write(&wrong, "idcar:s3cret-right\n").unwrap();
    b.wait_ready(Duration::from_secs(20)).await;
    let (ia, ib) = (a.take(200).await.unwrap(), b.take(200).await.unwrap());
    assert_unique(&[ia, ib].concat());

    let cmdline = std::fs::read(format!("/proc/{}/cmdline", b.child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("s3cret"));
    let metrics = b.admin_get("/metrics").await.1;
    assert!(!metrics.contains("s3cret"));
    a.stop_ok().await;
    b.stop_ok().await;
    let logs = b.logs();
    assert!(!logs.contains("s3cret"), "{logs}");
}

/// Certificates rotated under a held lease — a new CA, server and client certificate written
/// over the old files — are used on the next connection: ZooKeeper restarts with the new ones
/// only, idcar reconnects within its session (renewals land again), the lease survives, no
/// restart of idcar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificates_keep_the_lease() {
    let mut zk = Zk::tls("need");
    let dir = certs(&zk).to_path_buf();
    let connect = tls_connect(&zk);
    let mut flags = tls_flags(&dir, true);
    flags.extend(
        [
            "--zk-session-timeout",
            "20s",
            "--lease-horizon",
            "8s",
            "--renew-interval",
            "1s",
        ]
        .map(String::from),
    );
    let extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut a = start(&connect, &extra).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let before = a.take(100).await.unwrap();

    let status = Command::new("bash")
        .arg(format!("{}/zk/tls-certs.sh", env!("CARGO_MANIFEST_DIR")))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    // idcar looks at its files once a second.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    zk.kill(0);
    zk.restart(0);
    // The old CA no longer verifies the server: only the rotated files can reconnect, and
    // renewals (every second) land only over a connection made with them. The mark (8 s)
    // outlives the restart, so serving alone would prove nothing.
    let ok = "idcar_lease_renewals_total{result=\"ok\"}";
    let restarted = a.metric(ok).await.unwrap_or(0.0);
    a.wait_metric(ok, Duration::from_secs(15), |v| v >= restarted + 3.0)
        .await;
    let (status, body) = a.admin_get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    let after = a.take(100).await.unwrap();
    assert_unique(&[before, after].concat());
    assert_eq!(
        a.metric("idcar_lease_losses_total{reason=\"expired\"}")
            .await,
        Some(0.0),
        "the session and its lease survived"
    );
    a.stop_ok().await;
    let logs = a.logs();
    assert!(logs.contains("loaded rotated TLS certificates"), "{logs}");
}

/// serve with a CA that did not sign ZooKeeper's certificate (`bad` flags): not ready, the
/// reason on /readyz, still running and retrying.
async fn serve_with_an_untrusted_ca_is_not_ready(connect: &str, bad: &[String]) {
    let extra: Vec<&str> = bad.iter().map(String::as_str).collect();
    let mut a = Idcar::start(
        &serve_args(connect, &extra)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (status, body) = a.admin_get("/readyz").await;
        assert_ne!(status, 200, "never ready on a connection it cannot verify");
        if body.contains("not signed by --zk-tls-ca") || Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(body.contains("not signed by --zk-tls-ca"), "{body}");
    assert!(
        a.take(1).await.is_err(),
        "no ID without a verified connection"
    );
    assert!(a.child.try_wait().unwrap().is_none(), "still running");
    a.stop_ok().await;
}
