//! What the agreement covers, and the restore procedure of the runbooks.

use super::*;

/// An instance whose `--pool-size` differs from the recorded one is refused at start, naming
/// the flag; `idcar pool` counts free slots in the recorded size when not given one. A pool
/// whose identity says a store format newer than this idcar reads is refused at start, naming
/// both formats, and left as it was.
pub(crate) async fn pool_size_and_format_are_part_of_the_agreement(s: Store) {
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
pub(crate) async fn restore_procedure(mut s: Store) {
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
