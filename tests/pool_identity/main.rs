//! What operators and procedures do to a pool's store, against real ZooKeeper and etcd: the
//! pool's parameters deleted and recorded anew under running holders, a holder's mark lowered
//! or deleted, a pool size that differs, and what `idcar pool` shows of the pool's identity.

#[path = "../common/mod.rs"]
mod common;
mod marks;
mod params;
mod restore;

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
