//! Kubernetes as a `Fixture`: a real API server (shared by the suite's tests, a namespace each),
//! reached as the service account the shipped Role binds; the holder's slot object claimed as a
//! claimant claims it, its session object deleted when it is dropped.

use super::*;
use idcar_lease::kube::objects::{self as obj, Names};
use idcar_lease::kube::{Kube, KubeConfig, KubeMarks};
use idcar_testkit::kube::ApiServer;
use std::collections::BTreeMap;

pub(crate) struct KubeFixture {
    pub(crate) kube: Kube,
    /// How the holders reach the server (they share one follower of the pool).
    cfg: KubeConfig,
    pub(crate) names: Names,
    /// The pool's identity: its params object's uid.
    identity: String,
}

/// A holder: the marks of the slot its session holds; dropped, its session object goes (as a
/// ZooKeeper holder's session closes with its client), which frees the slot.
pub(crate) struct KubeHolder {
    pub(crate) marks: KubeMarks,
    kube: Kube,
    session: String,
}

impl Drop for KubeHolder {
    fn drop(&mut self) {
        let (kube, session) = (self.kube.clone(), self.session.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = kube.delete("a holder's end", &session, None).await;
            });
        }
    }
}

impl MarkStore for KubeHolder {
    type Version = u64;
    fn name(&self) -> &'static str {
        self.marks.name()
    }
    fn key(&self, slot: u32) -> String {
        self.marks.key(slot)
    }
    async fn read(&self, slot: u32) -> Result<Stored<u64>, StoreError> {
        self.marks.read(slot).await
    }
    async fn write(&self, c: &Claim<u64>, mark: u64) -> Result<u64, StoreError> {
        self.marks.write(c, mark).await
    }
    async fn own_write(
        &self,
        c: &Claim<u64>,
        attempts: &[u64],
    ) -> Result<Option<(u64, u64)>, StoreError> {
        self.marks.own_write(c, attempts).await
    }
    async fn write_down(&self, c: &Claim<u64>, mark: u64) -> Result<(), StoreError> {
        self.marks.write_down(c, mark).await
    }
    fn changed(
        &self,
        slot: u32,
        version: u64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.marks.changed(slot, version)
    }
    async fn give_back(&self, slot: u32) {
        self.marks.give_back(slot).await
    }
    async fn recheck(&self, c: &Claim<u64>) -> Result<Recheck<u64>, StoreError> {
        self.marks.recheck(c).await
    }
}

/// The identity a replaced pool stamps (the fixture's own is its params object's uid).
const REPLACED: &str = "conformance-pool-2";

/// idcar's client as the service account of a fresh namespace of the shared server, and its
/// configuration.
pub(crate) async fn kube_client() -> (Kube, KubeConfig) {
    let (config, ns) = tokio::task::spawn_blocking(|| ApiServer::shared().fresh_namespace())
        .await
        .unwrap();
    let cfg = KubeConfig {
        kubeconfig: Some(config),
        namespace: Some(ns),
        ttl: Duration::from_secs(15),
        followers: Default::default(),
    };
    let kube = Kube::connect(&cfg, Duration::from_secs(5)).await.unwrap();
    (kube, cfg)
}

impl KubeFixture {
    async fn annotate(&self, key: &str, value: Option<String>) {
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        self.kube
            .patch("an operator's edit", &self.names.slot(SLOT), patch)
            .await
            .unwrap();
    }

    async fn slot(&self) -> k8s_openapi::api::coordination::v1::Lease {
        let name = self.names.slot(SLOT);
        self.kube.get("read", &name).await.unwrap().unwrap()
    }
}

impl Fixture for KubeFixture {
    type S = KubeHolder;
    async fn new() -> Self {
        let (kube, cfg) = kube_client().await;
        let names = Names::new("conformance", "lable64", 0);
        // The pool's params object: its uid is the identity every write is fenced with.
        let params = BTreeMap::from([(obj::PARAMS.to_string(), "{}".to_string())]);
        let params = obj::object(&names, names.params(), "params", params);
        let params = kube.create("a pool's params", &params).await.unwrap();
        let identity = params.metadata.uid.clone().expect("a uid");
        let stamp = BTreeMap::from([(obj::STAMP.to_string(), identity.clone())]);
        let slot = obj::object(&names, &names.slot(SLOT), "slot", stamp);
        kube.create("a pool's slot", &slot).await.unwrap();
        KubeFixture {
            kube,
            cfg,
            names,
            identity,
        }
    }
    async fn holder(&self) -> KubeHolder {
        let session = self.names.session(&format!("{:016x}", rand_id()));
        let object = obj::object(&self.names, &session, "session", BTreeMap::new());
        self.kube.create("a session", &object).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let slot = self.slot().await;
            let free = match obj::holder(&slot) {
                None => true,
                Some(h) => self.kube.get("its holder", h).await.unwrap().is_none(),
            };
            if free {
                let patch = serde_json::json!({
                    "metadata": {"resourceVersion": obj::version(&slot)},
                    "spec": {"holderIdentity": session},
                });
                if self
                    .kube
                    .patch("claim", &self.names.slot(SLOT), patch)
                    .await
                    .is_ok()
                {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "slot {SLOT} stays held");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        KubeHolder {
            marks: KubeMarks::following(
                &self.cfg,
                &self.names,
                session.clone(),
                Some(self.identity.clone()),
            )
            .await
            .unwrap(),
            kube: self.kube.clone(),
            session,
        }
    }
    async fn foreign_write(&self, mark: u64) {
        self.annotate(obj::MARK, Some(format!("{mark} 00000000000000ff")))
            .await;
    }
    async fn stored(&self) -> u64 {
        obj::mark(&self.slot().await).unwrap().0
    }
    async fn delete_mark(&self) {
        self.annotate(obj::MARK, None).await;
    }
    async fn replace_pool(&self) {
        // As an instance recording a new identity stamps every slot.
        self.annotate(obj::STAMP, Some(REPLACED.to_string())).await;
    }
    async fn delete_witness(&self) {
        self.annotate(obj::WITNESS, None).await;
    }
    async fn witness(&self) -> u64 {
        obj::witness(&self.slot().await)
    }
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}
