//! etcd as a `Fixture`: a real member of each supported release, its holder kept by an etcd lease.

use super::*;

pub(crate) struct EtcdFixture<R: Release = Newest> {
    pub(crate) etcd: Etcd<R>,
    pub(crate) client: EtcdClient,
    pub(crate) paths: Paths,
}

/// An etcd holder: the marks of a lease kept alive while it exists; dropped, the lease is
/// revoked (as a ZooKeeper holder's session closes with its client).
pub(crate) struct EtcdHolder {
    pub(crate) marks: EtcdMarks,
    pub(crate) keeper: tokio::task::JoinHandle<()>,
}

impl Drop for EtcdHolder {
    fn drop(&mut self) {
        self.keeper.abort();
        let (etcd, lease) = (self.marks.etcd.clone(), self.marks.lease);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = etcd.revoke(lease).await;
            });
        }
    }
}

impl MarkStore for EtcdHolder {
    type Version = i64;
    fn name(&self) -> &'static str {
        self.marks.name()
    }
    fn key(&self, slot: u32) -> String {
        self.marks.key(slot)
    }
    async fn read(&self, slot: u32) -> Result<Stored<i64>, StoreError> {
        self.marks.read(slot).await
    }
    async fn write(&self, c: &Claim<i64>, mark: u64) -> Result<i64, StoreError> {
        self.marks.write(c, mark).await
    }
    async fn own_write(
        &self,
        c: &Claim<i64>,
        attempts: &[u64],
    ) -> Result<Option<(i64, u64)>, StoreError> {
        self.marks.own_write(c, attempts).await
    }
    async fn write_down(&self, c: &Claim<i64>, mark: u64) -> Result<(), StoreError> {
        self.marks.write_down(c, mark).await
    }
    async fn give_back(&self, slot: u32) {
        self.marks.give_back(slot).await
    }
    async fn recheck(&self, c: &Claim<i64>) -> Result<Recheck<i64>, StoreError> {
        self.marks.recheck(c).await
    }
}

pub(crate) fn etcd_put(
    key: &str,
    value: &[u8],
    lease: i64,
) -> idcar_etcd_api::etcdserverpb::TxnRequest {
    use idcar_etcd_api::etcdserverpb as rpc;
    rpc::TxnRequest {
        compare: vec![rpc::Compare {
            result: rpc::compare::CompareResult::Equal as i32,
            target: rpc::compare::CompareTarget::Create as i32,
            key: key.as_bytes().to_vec(),
            range_end: vec![],
            target_union: Some(rpc::compare::TargetUnion::CreateRevision(0)),
        }],
        success: vec![rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                key: key.as_bytes().to_vec(),
                value: value.to_vec(),
                lease,
                ..Default::default()
            })),
        }],
        failure: vec![],
    }
}

impl<R: Release> Fixture for EtcdFixture<R> {
    type S = EtcdHolder;
    async fn new() -> Self {
        let etcd = Etcd::<R>::new(1);
        let client = etcd_client(&etcd).await;
        let f = EtcdFixture {
            etcd,
            client,
            paths: Paths::new("/conformance", "lable64", 0),
        };
        f.put(&f.paths.params(), b"{}").await;
        f
    }
    async fn holder(&self) -> EtcdHolder {
        let client = etcd_client(&self.etcd).await;
        let (lease, _) = client.grant(3).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = client
                .txn("claim", etcd_put(&self.paths.slot(SLOT), b"{}", lease))
                .await
                .unwrap();
            if r.succeeded {
                break;
            }
            assert!(Instant::now() < deadline, "slot {SLOT} stays held");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let keep = client.clone();
        let keeper = tokio::spawn(async move {
            let mut stream = None;
            for _ in 0..600 {
                match stream.as_mut() {
                    Some(k) => {
                        if idcar_lease::etcd::Keeper::keep_alive(k).await.is_err() {
                            stream = None;
                        }
                    }
                    None => stream = keep.keeper(lease).await.ok().map(|(k, _)| k),
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        EtcdHolder {
            marks: EtcdMarks {
                etcd: client,
                paths: self.paths.clone(),
                lease,
                pool: Some({
                    let (created, modified) = self.params_revisions().await;
                    (self.paths.params(), created, modified)
                }),
                witness: true,
            },
            keeper,
        }
    }
    async fn foreign_write(&self, mark: u64) {
        let value = format!("{mark} 00000000000000ff");
        self.put(&self.paths.mark(SLOT), value.as_bytes()).await;
    }
    async fn delete_mark(&self) {
        self.delete(&self.paths.mark(SLOT)).await;
    }
    async fn delete_witness(&self) {
        self.delete(&self.paths.witness(SLOT)).await;
    }
    async fn witness(&self) -> u64 {
        use idcar_etcd_api::etcdserverpb as rpc;
        let req = rpc::RangeRequest {
            key: self.paths.witness(SLOT).into_bytes(),
            ..Default::default()
        };
        let r = self.client.range("read", req).await.unwrap();
        r.kvs
            .first()
            .and_then(|kv| idcar_lease::pool::tree::parse_mark(&kv.value))
            .unwrap_or(0)
    }
    async fn replace_pool(&self) {
        self.delete(&self.paths.params()).await;
        self.put(&self.paths.params(), b"{}").await;
    }
    async fn stored(&self) -> u64 {
        use idcar_etcd_api::etcdserverpb as rpc;
        let key = self.paths.mark(SLOT);
        let r = self
            .client
            .range(
                "read",
                rpc::RangeRequest {
                    key: key.into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        r.kvs.first().map_or(0, |kv| {
            idcar_lease::pool::tree::parse_mark(&kv.value).unwrap()
        })
    }
}

impl<R: Release> EtcdFixture<R> {
    pub(crate) async fn put(&self, key: &str, value: &[u8]) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let put = rpc::TxnRequest {
            compare: vec![],
            success: vec![rpc::RequestOp {
                request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                    key: key.as_bytes().to_vec(),
                    value: value.to_vec(),
                    ..Default::default()
                })),
            }],
            failure: vec![],
        };
        self.client.txn("put", put).await.unwrap();
    }

    pub(crate) async fn delete(&self, key: &str) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let del = rpc::TxnRequest {
            compare: vec![],
            success: vec![rpc::RequestOp {
                request: Some(rpc::request_op::Request::RequestDeleteRange(
                    rpc::DeleteRangeRequest {
                        key: key.as_bytes().to_vec(),
                        ..Default::default()
                    },
                )),
            }],
            failure: vec![],
        };
        self.client.txn("delete", del).await.unwrap();
    }

    pub(crate) async fn params_revisions(&self) -> (i64, i64) {
        use idcar_etcd_api::etcdserverpb as rpc;
        let r = self
            .client
            .range(
                "read",
                rpc::RangeRequest {
                    key: self.paths.params().into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        (r.kvs[0].create_revision, r.kvs[0].mod_revision)
    }
}
