//! What is specific to the ZooKeeper store, against real ZooKeeper servers (standalone and a
//! 3-node ensemble): 65 contenders for 64 slots, ZooKeeper down past the horizon, forced session expiry, digest auth, a corrupt mark, a lost reply, a flooded
//! instance. What every store must survive is in `store_faults.rs`.

mod common;

use common::zk::Zk;
use common::*;
use idcar::layout::lable64::Fields;
use nix::sys::signal::Signal;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn ts(id: u64) -> u64 {
    Fields::unpack(id).expect("valid lable64 ID").timestamp_ms
}

fn generator(id: u64) -> u8 {
    Fields::unpack(id).expect("valid lable64 ID").generator
}

async fn start(zk: &Zk, extra: &[&str]) -> Idcar {
    common::zk::start(&zk.connect(), extra).await
}

/// `idcar pool --json` for cluster `c`.
fn pool(zk: &Zk, c: u8) -> serde_json::Value {
    let (code, out, err) = run(&[
        "pool",
        "--zk",
        &zk.connect(),
        "--cluster-id",
        &c.to_string(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

/// 65 contenders for 64 slots: 64 hold distinct slots, the 65th is not ready, is visible in
/// metrics, and takes the first slot that frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_five_contenders_for_sixty_four_slots() {
    let zk = Zk::standalone();
    let mut all = Vec::new();
    for _ in 0..65 {
        all.push(start(&zk, &["--cluster-id", "1", "--zk-session-timeout", "4s"]).await);
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut ready, mut waiting) = (Vec::new(), Vec::new());
    loop {
        ready.clear();
        waiting.clear();
        for (i, a) in all.iter().enumerate() {
            if a.admin_get("/readyz").await.0 == 200 {
                ready.push(i);
            } else {
                waiting.push(i);
            }
        }
        if ready.len() == 64 && waiting.len() == 1 {
            let w = &all[waiting[0]];
            if w.metric("idcar_pool_exhausted").await == Some(1.0) {
                break;
            }
        }
        if Instant::now() > deadline {
            let mut why = String::new();
            for &i in &waiting {
                let log = all[i].logs();
                let tail: Vec<&str> = log.lines().rev().take(8).collect();
                why += &format!(
                    "--- waiting instance {i}:\n{}\n",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            let (_, pool_text, _) = run(&["pool", "--zk", &zk.connect(), "--cluster-id", "1"]);
            panic!(
                "{} ready, {} waiting\n{why}\n{pool_text}",
                ready.len(),
                waiting.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut slots = HashSet::new();
    for &i in &ready {
        let s = all[i].metric("idcar_lease_slot").await.unwrap();
        assert!(slots.insert(s as i64), "slot {s} held twice");
    }
    assert_eq!(slots.len(), 64);
    let w = waiting[0];
    let (status, body) = all[w].admin_get("/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("pool exhausted"), "{body}");
    assert_eq!(all[w].metric("idcar_lease_slot").await, Some(-1.0));
    let any = &all[ready[0]];
    let deadline = Instant::now() + Duration::from_secs(10);
    while any.metric("idcar_pool_slots_held").await != Some(64.0) {
        assert!(
            Instant::now() < deadline,
            "the slots_held gauge never reached 64"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The gauges follow the store's changes at most once a second.
    while any.metric("idcar_pool_contenders_waiting").await < Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "the contenders_waiting gauge never reached 1"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Free one slot: the waiting instance takes it.
    let freed = all[ready[10]].metric("idcar_lease_slot").await.unwrap();
    all[ready[10]].stop_ok().await;
    all[w].wait_ready(Duration::from_secs(20)).await;
    assert_eq!(all[w].metric("idcar_lease_slot").await, Some(freed));
    assert_eq!(all[w].metric("idcar_pool_exhausted").await, Some(0.0));
    let ids = all[w].take(10).await.unwrap();
    assert!(ids.iter().all(|id| f64::from(generator(*id)) == freed));
}

/// ZooKeeper fully down longer than the horizon: serving stops at the mark with 503, resumes
/// after ZooKeeper returns; no duplicates across the whole run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_down_stops_at_the_mark_and_recovers() {
    let mut zk = Zk::standalone();
    let args = [
        "--pool-size",
        "1",
        "--lease-horizon",
        "1s",
        "--renew-interval",
        "200ms",
        "--zk-session-timeout",
        "2s",
    ];
    let mut a = start(&zk, &args).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(500).await.unwrap();
    zk.kill(0);
    let down_at = Instant::now();
    let down_ms = now_ms();
    let mut during = Vec::new();
    // Serving continues up to the mark, then refuses with 503.
    let mut h = a.http().await;
    let refused_at = loop {
        let r = h.get("/ids?count=5", false).await.unwrap();
        if r.status == 503 {
            assert_eq!(r.retry_after.as_deref(), Some("1"));
            break down_at.elapsed();
        }
        assert_eq!(r.status, 200, "{}", r.body);
        during.extend(r.body.lines().map(|l| u64::from_str_radix(l, 16).unwrap()));
        assert!(
            down_at.elapsed() < Duration::from_secs(10),
            "still serving long past the mark"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        refused_at <= Duration::from_millis(1_600),
        "refused only after {refused_at:?}"
    );
    // The core property: nothing issued during the outage lies beyond the last mark written,
    // at most one horizon (1 s) past the last renewal before the outage.
    for id in &during {
        assert!(
            ts(*id) <= down_ms + 1_000,
            "issued {} past the mark bound {}",
            ts(*id),
            down_ms + 1_000
        );
    }
    all.extend(during);
    assert_eq!(a.admin_get("/readyz").await.0, 503);
    tokio::time::sleep(Duration::from_secs(2)).await;
    zk.restart(0);
    a.wait_ready(Duration::from_secs(40)).await;
    all.extend(a.take(500).await.unwrap());
    assert_unique(&all);
    a.stop_ok().await;
}

/// Forced session expiry (the process frozen past its session timeout): a new session, the
/// same slot claimed again (preferred over the free ones) and taken back without a wait past
/// its own mark (it is still its own last write), and no duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_reclaims_without_duplicates() {
    let zk = Zk::standalone();
    // A first instance takes slot 0, so the one under test holds slot 1: "the same slot again"
    // is then not simply the lowest free one.
    let mut other = start(&zk, &["--cluster-id", "3"]).await;
    other.wait_ready(Duration::from_secs(15)).await;
    let mut a = start(&zk, &["--lease-horizon", "5s", "--cluster-id", "3"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    other.stop_ok().await;
    let slot = a.metric("idcar_lease_slot").await.unwrap();
    assert_eq!(slot, 1.0);
    let mut all = a.take(500).await.unwrap();
    let before = all.iter().map(|id| ts(*id)).max().unwrap();
    a.signal(Signal::SIGSTOP);
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    a.signal(Signal::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.metric("idcar_lease_claims_total").await.unwrap_or(0.0) < 2.0 {
        assert!(Instant::now() < deadline, "no re-claim: {}", a.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.wait_ready(Duration::from_secs(20)).await;
    assert!(
        a.metric("idcar_lease_losses_total{reason=\"expired\"}")
            .await
            .unwrap()
            >= 1.0
    );
    assert_eq!(
        a.metric("idcar_lease_slot").await,
        Some(slot),
        "the previous slot is preferred"
    );
    let waited = a.metric("idcar_lease_mark_wait_seconds_sum").await.unwrap();
    assert!(
        waited < 0.5 && a.logs().contains("slot claimed back"),
        "waited {waited}s past its own mark (horizon 5 s, paused 1.6 s): {}",
        a.logs()
    );
    let after = a.take(500).await.unwrap();
    assert!(after.iter().all(|id| ts(*id) > before));
    all.extend(after);
    assert_unique(&all);
    a.stop_ok().await;
}

/// Digest auth: nodes are creator-only; `pool` needs the same credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_auth_protects_the_tree() {
    let zk = Zk::standalone();
    let mut a = start(&zk, &["--zk-auth", "idcar:s3cret", "--zk-root", "/secure"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let connect = zk.connect();
    let base = [
        "pool",
        "--zk",
        connect.as_str(),
        "--zk-root",
        "/secure",
        "--cluster-id",
        "0",
        "--json",
    ];
    let (code, out, err) = run(&[&base[..], &["--zk-auth", "idcar:s3cret"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("\"pid\": {}", a.child.id())), "{out}");
    let (code, _, err) = run(&base);
    assert_eq!(code, 1);
    assert!(err.contains("not authorized"), "{err}");
    a.stop_ok().await;
}

/// A slot whose mark znode holds garbage is skipped (with an error logged), never claimed in a
/// loop: the instance takes another slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_mark_is_skipped() {
    let zk = Zk::standalone();
    let connect = zk.connect();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let c = common::zk::client(&connect).await;
            let opts = zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all());
            c.mkdir("/idcar/lable64/5/marks", &opts).await.unwrap();
            c.create("/idcar/lable64/5/marks/0", b"not-a-number", &opts)
                .await
                .unwrap();
        })
    })
    .join()
    .unwrap();
    let mut a = start(
        &zk,
        &[
            "--cluster-id",
            "5",
            "--generator-id",
            "0",
            "--pool-size",
            "2",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    assert_eq!(a.metric("idcar_lease_slot").await, Some(1.0));
    assert!(a.logs().contains("unreadable"), "{}", a.logs());
    let p = pool(&zk, 5);
    assert_eq!(
        p["held"].as_array().unwrap().len(),
        1,
        "slot 0 not left held: {p}"
    );
    a.stop_ok().await;
}

/// A renewal applied by the server whose reply is lost: the next renewal conflicts with our own
/// write, which idcar recognises (the slot node is still this session's, the mark holds a value
/// it wrote), so the lease is kept: no loss, no re-claim, no gap in serving past the mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_to_an_applied_renewal_keeps_the_lease() {
    let zk = Zk::standalone();
    let proxy = common::proxy::Proxy::start(zk.connect()).await;
    let via = format!("127.0.0.1:{}", proxy.port);
    let a = start(
        &zk,
        &[
            "--zk",
            &via,
            "--zk-session-timeout",
            "6s",
            "--lease-horizon",
            "4s",
            "--renew-interval",
            "200ms",
        ],
    )
    .await;
    a.wait_ready(Duration::from_secs(15)).await;
    let renewals = a
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .unwrap();
    // Requests still reach the server (renewals are applied) but no reply comes back...
    proxy.drop_replies(true);
    tokio::time::sleep(Duration::from_millis(700)).await;
    // ...then the connection breaks: the client reconnects within its session.
    proxy.drop_replies(false);
    proxy.reset();
    let deadline = Instant::now() + Duration::from_secs(20);
    while a
        .metric("idcar_lease_renewals_total{result=\"ok\"}")
        .await
        .unwrap()
        < renewals + 5.0
    {
        assert!(
            Instant::now() < deadline,
            "renewals did not resume: {}",
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = a.logs();
    assert_eq!(
        a.metric("idcar_lease_claims_total").await,
        Some(1.0),
        "{logs}"
    );
    assert_eq!(
        a.metric("idcar_lease_losses_total{reason=\"stolen\"}")
            .await,
        Some(0.0)
    );
    assert!(
        logs.contains("an earlier mark write had gone through"),
        "{logs}"
    );
    assert_eq!(a.admin_get("/readyz").await.0, 200);
}

/// ZooKeeper mode under a descriptor limit of 256 with the socket and the admin port flooded
/// and other clients hammering, for longer than the horizon: every renewal succeeds and the
/// lease is never lost (the lease runs on its own thread, with descriptors kept for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooded_instance_keeps_its_zookeeper_lease() {
    raise_nofile();
    let zk = Zk::standalone();
    let args = common::zk::serve_args(&zk.connect(), &["--idle-timeout", "10s"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut idcar = Idcar::start_under("ulimit -n 256", &args).await;
    idcar.wait_ready(Duration::from_secs(20)).await;
    let until = Instant::now() + Duration::from_secs(5);
    let (socket, admin) = (idcar.socket.clone(), idcar.admin.clone());
    let flood = tokio::spawn(async move {
        let mut held = Vec::new();
        for i in 0..1_500 {
            if i % 2 == 0 {
                if let Ok(Ok(s)) = tokio::time::timeout(
                    Duration::from_millis(200),
                    tokio::net::UnixStream::connect(&socket),
                )
                .await
                {
                    held.push(Box::new(s) as Box<dyn std::any::Any + Send>);
                }
            } else if let Ok(Ok(s)) = tokio::time::timeout(
                Duration::from_millis(200),
                tokio::net::TcpStream::connect(&admin),
            )
            .await
            {
                held.push(Box::new(s));
            }
        }
        tokio::time::sleep_until(until.into()).await;
        held.len()
    });
    let (ids, refused) = hammer(&idcar, until).await;
    let opened = flood.await.unwrap();
    assert!(opened > 1_000, "{opened}");
    assert!(ids.len() > 1_000, "{} IDs", ids.len());
    assert_eq!(refused, 0, "{}", idcar.logs());
    assert_eq!(
        idcar
            .metric("idcar_lease_renewals_total{result=\"error\"}")
            .await,
        Some(0.0)
    );
    assert_eq!(idcar.metric_sum("idcar_lease_losses_total").await, 0.0);
    assert!(
        !idcar.logs().contains("Too many open files"),
        "{}",
        idcar.logs()
    );
    idcar.stop_ok().await;
}
