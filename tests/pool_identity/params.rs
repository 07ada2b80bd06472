//! The pool's parameters replaced or recreated under its holders.

use super::*;

/// An operator replaces `params` with the same record (deleted and created again, as a script
/// restoring it would) under an idle holder that writes its mark seldom: the holder watches the
/// record and the pool's identity, so it stops issuing within a second — not at its next
/// write — and says why.
pub(crate) async fn params_replaced_stops_an_idle_holder_within_a_second(s: Store) {
    let idle = [
        "--lease-horizon",
        "5s",
        "--idle-horizon",
        "60s",
        "--renew-interval",
        "1s",
    ];
    let a = s.start(&idle).await;
    a.wait_ready(Duration::from_secs(15)).await;
    a.take(100).await.unwrap();
    // Past its first writes: idle from here on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let key = "/idcar/lable64/0/params";
    let record = s.get(key).await.expect("params recorded");
    s.delete(key).await;
    match &s {
        Store::Zk(z) => {
            let mode = zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all());
            let client = z.client().await;
            client.create(key, record.as_bytes(), &mode).await.unwrap();
        }
        Store::Etcd(_) => s.put(key, &record).await,
    }
    let replaced = Instant::now();
    let why = readyz_until(&a, Duration::from_secs(10), |r| r.starts_with("not ready")).await;
    let took = replaced.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the holder stopped {took:?} after params was replaced: {why}"
    );
    assert!(a.take(1).await.is_err(), "still issuing: {why}");
    assert!(
        a.metric("idcar_lease_losses_total{reason=\"replaced\"}")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_params_replaced_stops_an_idle_holder_within_a_second() {
    params_replaced_stops_an_idle_holder_within_a_second(Store::zk()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_params_replaced_stops_an_idle_holder_within_a_second() {
    params_replaced_stops_an_idle_holder_within_a_second(Store::etcd()).await;
}

/// An operator deletes `params` under a running holder "to change mid-bits", and an instance
/// with other parameters starts: it records a new pool identity, which fences the old holder
/// (it stops issuing at once, says why, and — disagreeing with the pool now — stays
/// not ready naming the flag), and it issues nothing until the clock is past every mark the
/// old holder wrote. No ID is issued twice.
pub(crate) async fn params_recreated_under_a_holder(s: Store) {
    let a = s.start(&["--layout", "si53", "--mid-bits", "5"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let hammering = Instant::now() + Duration::from_secs(3);
    let (mut all, _) = hammer(&a, Instant::now() + Duration::from_millis(500)).await;
    // The holder watches `params`: left running, it would record its own parameters again
    // before the new instance starts. Frozen meanwhile, it finds the new record when thawed.
    a.signal(nix::sys::signal::Signal::SIGSTOP);
    s.delete("/idcar/si53/0/params").await;
    let mut b = s.start(&["--layout", "si53", "--mid-bits", "4"]).await;
    readyz_until(&b, Duration::from_secs(15), |r| !r.contains("connecting")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.signal(nix::sys::signal::Signal::SIGCONT);
    let (from_a, from_b) = tokio::join!(hammer(&a, hammering), hammer(&b, hammering));
    all.extend(from_a.0);
    let why = readyz_until(&a, Duration::from_secs(10), |r| r.contains("--mid-bits")).await;
    assert!(
        why.starts_with("not ready") && why.contains("the pool has 4, this instance 5"),
        "{why}"
    );
    b.wait_ready(Duration::from_secs(15)).await;
    let mut later = b.take(100).await.unwrap();
    all.extend(from_b.0);
    all.append(&mut later);
    assert_unique(&all);
    assert!(
        a.metric("idcar_lease_losses_total{reason=\"replaced\"}")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
    assert!(
        b.logs().contains("recorded the pool's identity"),
        "{}",
        b.logs()
    );
    // What `idcar pool` shows: the new identity and what was recorded with it.
    let (code, out, err) = s.pool(&["--layout", "si53", "--mid-bits", "4"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pool identity "), "{out}");
    assert!(
        out.contains("mid-bits=4") && out.contains("pool size 16"),
        "{out}"
    );
    b.stop_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_params_recreated_under_a_holder() {
    params_recreated_under_a_holder(Store::zk()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_params_recreated_under_a_holder() {
    params_recreated_under_a_holder(Store::etcd()).await;
}
