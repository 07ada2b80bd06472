//! What operators and procedures do to a pool's store, against real ZooKeeper and etcd: the
//! pool's parameters deleted and recorded anew under running holders, a holder's mark lowered
//! or deleted, a pool size that differs, and what `idcar pool` shows of the pool's identity.

mod common;

use common::etcd::Etcd;
use common::zk::Zk;
use common::*;
use std::time::{Duration, Instant};

/// One store under test, reached the way an operator would (zkCli's operations through a
/// client, etcdctl).
enum Store {
    Zk(Zk),
    Etcd(Etcd),
}

impl Store {
    fn zk() -> Store {
        Store::Zk(Zk::standalone())
    }

    fn etcd() -> Store {
        Store::Etcd(Etcd::single())
    }

    fn connect(&self) -> String {
        match self {
            Store::Zk(z) => z.connect(),
            Store::Etcd(e) => e.endpoints(),
        }
    }

    fn flag(&self) -> &'static str {
        match self {
            Store::Zk(_) => "--zk",
            Store::Etcd(_) => "--etcd",
        }
    }

    async fn start(&self, extra: &[&str]) -> Idcar {
        match self {
            Store::Zk(_) => common::zk::start(&self.connect(), extra).await,
            Store::Etcd(_) => common::etcd::start(&self.connect(), extra).await,
        }
    }

    async fn start_refused(&self, extra: &[&str]) -> Idcar {
        match self {
            Store::Zk(_) => common::zk::start_refused(&self.connect(), extra).await,
            Store::Etcd(_) => common::etcd::start_refused(&self.connect(), extra).await,
        }
    }

    async fn delete(&self, key: &str) {
        match self {
            Store::Zk(z) => z.client().await.delete(key, None).await.unwrap(),
            Store::Etcd(e) => {
                e.etcdctl(0, &["del", key]).unwrap();
            }
        }
    }

    async fn put(&self, key: &str, value: &str) {
        match self {
            Store::Zk(z) => {
                z.client()
                    .await
                    .set_data(key, value.as_bytes(), None)
                    .await
                    .unwrap();
            }
            Store::Etcd(e) => {
                e.etcdctl(0, &["put", key, value]).unwrap();
            }
        }
    }

    async fn get(&self, key: &str) -> Option<String> {
        match self {
            Store::Zk(z) => z
                .client()
                .await
                .get_data(key)
                .await
                .ok()
                .map(|(d, _)| String::from_utf8_lossy(&d).into_owned()),
            Store::Etcd(e) => {
                let out = e.etcdctl(0, &["get", key, "--print-value-only"]).ok()?;
                let v = out.trim_end().to_string();
                (!v.is_empty()).then_some(v)
            }
        }
    }

    /// The keys (ZooKeeper: children) directly under `dir`, full paths.
    async fn children(&self, dir: &str) -> Vec<String> {
        match self {
            Store::Zk(z) => z
                .client()
                .await
                .list_children(dir)
                .await
                .unwrap()
                .into_iter()
                .map(|c| format!("{dir}/{c}"))
                .collect(),
            Store::Etcd(e) => e
                .etcdctl(0, &["get", &format!("{dir}/"), "--prefix", "--keys-only"])
                .unwrap()
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    /// The store's data directory (its only node's).
    fn data_dir(&self) -> std::path::PathBuf {
        match self {
            Store::Zk(z) => z.dir(0).join("data"),
            Store::Etcd(e) => e.members[0].dir.clone(),
        }
    }

    fn stop(&mut self) {
        match self {
            Store::Zk(z) => z.kill(0),
            Store::Etcd(e) => e.kill(0),
        }
    }

    fn start_again(&mut self) {
        match self {
            Store::Zk(z) => z.restart(0),
            Store::Etcd(e) => {
                e.restart(0);
                e.wait_up(0, Duration::from_secs(20));
            }
        }
    }

    /// A backup of the store's data, taken (briefly stopped) into `to`.
    fn snapshot(&mut self, to: &std::path::Path) {
        self.stop();
        copy_dir(&self.data_dir(), to);
        self.start_again();
    }

    /// The store restored from the backup in `from` (stopped, data replaced, started).
    fn restore(&mut self, from: &std::path::Path) {
        self.stop();
        let data = self.data_dir();
        std::fs::remove_dir_all(&data).unwrap();
        copy_dir(from, &data);
        self.start_again();
    }

    fn pool(&self, extra: &[&str]) -> (i32, String, String) {
        let connect = self.connect();
        let mut args = vec!["pool", self.flag(), connect.as_str()];
        args.extend(extra);
        run(&args)
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// The tick of a lable64 ID.
fn tick(id: u64) -> u64 {
    idcar::layout::lable64::Fields::unpack(id)
        .expect("a lable64 ID")
        .timestamp_ms
}

/// Waits (bounded) until `idcar`'s `/readyz` body satisfies `f`: the body.
async fn readyz_until(idcar: &Idcar, limit: Duration, f: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let (_, body) = idcar.admin_get("/readyz").await;
        if f(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "readyz: {body}\n{}",
            idcar.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An operator replaces `params` with the same record (deleted and created again, as a script
/// restoring it would) under an idle holder that writes its mark seldom: the holder watches the
/// record and the pool's identity, so it stops issuing within a second — not at its next
/// write — and says why.
async fn params_replaced_stops_an_idle_holder_within_a_second(s: Store) {
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
async fn params_recreated_under_a_holder(s: Store) {
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

/// A holder's mark is overwritten 10 s lower (or deleted) by someone else while a waiter
/// whose clock is 2 s behind queues for the slot: the holder writes the mark back up at its
/// next renewal and keeps the slot (counted, logged); the waiter never gets a lowered floor,
/// and after the holder's release it issues only above everything the holder issued.
async fn a_tampered_mark_never_reaches_the_successor(s: Store, delete: bool) {
    let pool = ["--pool-size", "1"];
    let a = s.start(&pool).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut all = a.take(1_000).await.unwrap();
    let b = s
        .start(&[&pool[..], &["--clock-skew", "-2s"]].concat())
        .await;
    let key = "/idcar/lable64/0/marks/0";
    let stored = s.get(key).await.expect("a's mark");
    let mark: u64 = stored.split(' ').next().unwrap().parse().unwrap();
    if delete {
        s.delete(key).await;
    } else {
        s.put(key, &format!("{} 00000000000000ff", mark - 10_000))
            .await;
    }
    let (from_a, _) = hammer(&a, Instant::now() + Duration::from_secs(2)).await;
    assert!(!from_a.is_empty(), "a stopped issuing: {}", a.logs());
    all.extend(from_a);
    assert!(
        a.metric("idcar_lease_marks_restored_total")
            .await
            .unwrap_or(0.0)
            >= 1.0,
        "{}",
        a.logs()
    );
    assert!(a.logs().contains("writing it back up"), "{}", a.logs());
    assert_ne!(
        b.admin_get("/readyz").await.0,
        200,
        "the waiter took the slot"
    );
    let now: u64 = s
        .get(key)
        .await
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let highest = all.iter().map(|id| tick(*id)).max().unwrap();
    assert!(now >= highest, "stored {now}, issued up to {highest}");
    let mut a = a;
    a.stop_ok().await;
    b.wait_ready(Duration::from_secs(15)).await;
    let from_b = b.take(1_000).await.unwrap();
    assert!(from_b.iter().all(|id| tick(*id) > highest));
    all.extend(from_b);
    assert_unique(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_lowered_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::zk(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_lowered_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::etcd(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_deleted_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::zk(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_deleted_mark_never_reaches_the_successor() {
    a_tampered_mark_never_reaches_the_successor(Store::etcd(), true).await;
}

/// A holder dies (kill -9) and its mark is then overwritten 10 s lower (or deleted) before
/// anyone could write it back, while a waiter whose clock is 5 s behind (more than the 2 s the
/// dead holder's session outlives it) queues for the slot:
/// the waiter's floor comes from the mark's witness, which the tampering did not touch, so it
/// issues only above everything the dead holder issued.
async fn a_mark_tampered_after_its_holder_died(s: Store, delete: bool) {
    // The dead holder's session (etcd lease) ends 2 s after its death.
    let expiry = match s {
        Store::Zk(_) => "--zk-session-timeout",
        Store::Etcd(_) => "--etcd-ttl",
    };
    let pool = ["--pool-size", "1", expiry, "2s"];
    let mut a = s.start(&pool).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let b = s
        .start(&[&pool[..], &["--clock-skew", "-5s"]].concat())
        .await;
    let (all, _) = hammer(&a, Instant::now() + Duration::from_secs(1)).await;
    assert!(!all.is_empty(), "a issued nothing: {}", a.logs());
    a.signal(nix::sys::signal::Signal::SIGKILL);
    a.wait_exit(Duration::from_secs(10)).await;
    let key = "/idcar/lable64/0/marks/0";
    let stored = s.get(key).await.expect("a's mark");
    let mark: u64 = stored.split(' ').next().unwrap().parse().unwrap();
    if delete {
        s.delete(key).await;
    } else {
        s.put(key, &format!("{} 00000000000000ff", mark - 10_000))
            .await;
    }
    let highest = all.iter().map(|id| tick(*id)).max().unwrap();
    b.wait_ready(Duration::from_secs(20)).await;
    let from_b = b.take(1_000).await.unwrap();
    let lowest = from_b.iter().map(|id| tick(*id)).min().unwrap();
    assert!(
        lowest > highest,
        "the successor issued tick {lowest}, at or below the dead holder's {highest}: {}",
        b.logs()
    );
    let mut all = all;
    all.extend(from_b);
    assert_unique(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_mark_lowered_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::zk(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_mark_lowered_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::etcd(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_mark_deleted_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::zk(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_mark_deleted_after_its_holder_died() {
    a_mark_tampered_after_its_holder_died(Store::etcd(), true).await;
}

/// An instance whose `--pool-size` differs from the recorded one is refused at start, naming
/// the flag; `idcar pool` counts free slots in the recorded size when not given one. A pool
/// whose identity says a store format newer than this idcar reads is refused at start, naming
/// both formats, and left as it was.
async fn pool_size_and_format_are_part_of_the_agreement(s: Store) {
    let mut a = s.start(&["--pool-size", "2"]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    let mut odd = s.start_refused(&["--pool-size", "3"]).await;
    let (st, log) = odd.exit_and_logs(Duration::from_secs(15)).await;
    assert!(!st.success(), "{log}");
    assert!(
        log.contains("--pool-size: the pool has 2, this instance 3"),
        "{log}"
    );
    let (code, out, err) = s.pool(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1/2 slots held, 1 free"), "{out}");
    assert!(out.contains("pool size 2"), "{out}");
    let (_, json, _) = s.pool(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["identity"]["pool_size"], 2, "{json}");
    assert_eq!(
        v[0]["identity"]["parameters"]["layout"], "lable64",
        "{json}"
    );
    assert_eq!(v[0]["identity"]["format"], 1, "{json}");
    a.stop_ok().await;

    let ids = s.children("/idcar/lable64/0/identity").await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    let mut rec: serde_json::Value = serde_json::from_str(&s.get(&ids[0]).await.unwrap()).unwrap();
    assert_eq!(rec["format"], 1, "{rec}");
    rec["format"] = 2.into();
    let newer = rec.to_string();
    s.put(&ids[0], &newer).await;
    let mut old = s.start_refused(&["--pool-size", "2"]).await;
    let (st, log) = old.exit_and_logs(Duration::from_secs(15)).await;
    assert!(!st.success(), "{log}");
    assert!(log.contains("store format 2"), "{log}");
    assert!(log.contains("reads format 1"), "{log}");
    assert_eq!(s.get(&ids[0]).await.as_deref(), Some(newer.as_str()));
    let (code, out, err) = s.pool(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("store format 2, newer than this idcar reads"),
        "{out}"
    );
    // Nor is it recorded over when its `params` is gone (a restore, a parameter change): the
    // newer pool's identity stays, and this idcar still refuses.
    s.delete("/idcar/lable64/0/params").await;
    let mut again = s.start_refused(&["--pool-size", "2"]).await;
    let (st, log) = again.exit_and_logs(Duration::from_secs(15)).await;
    assert!(!st.success(), "{log}");
    assert!(log.contains("store format 2"), "{log}");
    assert_eq!(s.get(&ids[0]).await.as_deref(), Some(newer.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_pool_size_and_format_are_part_of_the_agreement() {
    pool_size_and_format_are_part_of_the_agreement(Store::zk()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_pool_size_and_format_are_part_of_the_agreement() {
    pool_size_and_format_are_part_of_the_agreement(Store::etcd()).await;
}

/// A snapshot restore rolls every mark (and slot) back to the snapshot's time, below what the
/// holders issued since. The documented procedure: keep the instances away from the store
/// (here: frozen), restore it, delete the pool's `params`, let the instances back. The holders
/// stop at their first write (the pool was replaced), the first to agree again records a new
/// identity whose floor is above every mark and one horizon past its clock, and every
/// instance issues only above it: no ID is issued twice, and the pool serves again.
async fn restore_procedure(mut s: Store) {
    let a = s.start(&[]).await;
    let b = s.start(&[]).await;
    a.wait_ready(Duration::from_secs(15)).await;
    b.wait_ready(Duration::from_secs(15)).await;
    let backup = tempfile::tempdir().unwrap();
    let snapshot = backup.path().join("snapshot");
    s.snapshot(&snapshot);
    a.wait_ready(Duration::from_secs(20)).await;
    b.wait_ready(Duration::from_secs(20)).await;
    // The holders go on issuing (and renewing) well past the snapshot's marks.
    let until = Instant::now() + Duration::from_secs(3);
    let (mut all, _) = hammer(&a, until).await;
    all.extend(hammer(&b, until).await.0);
    let before = all.iter().map(|id| tick(*id)).max().unwrap();
    a.signal(nix::sys::signal::Signal::SIGSTOP);
    b.signal(nix::sys::signal::Signal::SIGSTOP);
    s.restore(&snapshot);
    s.delete("/idcar/lable64/0/params").await;
    a.signal(nix::sys::signal::Signal::SIGCONT);
    b.signal(nix::sys::signal::Signal::SIGCONT);
    let until = Instant::now() + Duration::from_secs(8);
    let (from_a, from_b) = tokio::join!(hammer(&a, until), hammer(&b, until));
    for id in from_a.0.iter().chain(from_b.0.iter()) {
        assert!(
            tick(*id) > before,
            "an ID at tick {} after the restore, issued up to {before} before it",
            tick(*id)
        );
    }
    all.extend(from_a.0);
    all.extend(from_b.0);
    a.wait_ready(Duration::from_secs(20)).await;
    b.wait_ready(Duration::from_secs(20)).await;
    all.extend(a.take(100).await.unwrap());
    all.extend(b.take(100).await.unwrap());
    assert_unique(&all);
    // Recorded when the pool was created, and anew after the restore.
    let recorded: usize = [&a, &b]
        .iter()
        .map(|i| i.logs().matches("recorded the pool's identity").count())
        .sum();
    assert!(recorded >= 2, "{}\n{}", a.logs(), b.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_restore_procedure() {
    restore_procedure(Store::zk()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restore_procedure() {
    restore_procedure(Store::etcd()).await;
}
