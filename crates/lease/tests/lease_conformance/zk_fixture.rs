//! ZooKeeper as a `Fixture`: a real server of each supported release.

use super::*;

pub(crate) struct ZkFixture<R: Release = Newest> {
    pub(crate) zk: Zk<R>,
    pub(crate) client: zk::Client,
    pub(crate) paths: Paths,
}

impl<R: Release> ZkFixture<R> {
    /// Records the pool's parameters and its identity, as an instance does: the path of the
    /// identity node every mark write checks.
    pub(crate) async fn record_pool(&self) -> String {
        let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let (stat, _) = self
            .client
            .create(&self.paths.params(), b"{}", &mode)
            .await
            .unwrap();
        let id = self.paths.identity(&format!(
            "{}-0000000000",
            idcar_lease::identity::id_of(stat.czxid, 0)
        ));
        self.client.create(&id, b"{}", &mode).await.unwrap();
        id
    }

    pub(crate) async fn identity(&self) -> String {
        let (_, stat) = self.client.get_data(&self.paths.params()).await.unwrap();
        self.paths.identity(&format!(
            "{}-0000000000",
            idcar_lease::identity::id_of(stat.czxid, 0)
        ))
    }
}

impl<R: Release> Fixture for ZkFixture<R> {
    type S = ZkMarks;
    async fn new() -> Self {
        let zk = Zk::<R>::new(1);
        let client = zk.client().await;
        let paths = Paths::new("/conformance", "lable64", 0);
        for dir in [
            paths.slots(),
            paths.marks(),
            paths.witnesses(),
            paths.identities(),
        ] {
            let mode = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            client.mkdir(&dir, &mode).await.unwrap();
        }
        let f = ZkFixture { zk, client, paths };
        f.record_pool().await;
        f
    }
    async fn holder(&self) -> ZkMarks {
        let client = self.zk.client().await;
        let eph = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match client.create(&self.paths.slot(SLOT), b"{}", &eph).await {
                Ok(_) => break,
                Err(zk::Error::NodeExists) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => panic!("claiming slot {SLOT}: {e}"),
            }
        }
        ZkMarks {
            client,
            paths: self.paths.clone(),
            auth: false,
            pool: Some(PoolFence {
                params: self.paths.params(),
                params_version: 0,
                params_creation: self
                    .client
                    .check_stat(&self.paths.params())
                    .await
                    .unwrap()
                    .expect("params recorded")
                    .czxid,
                identity: self.identity().await,
            }),
            witness: true,
        }
    }
    async fn foreign_write(&self, mark: u64) {
        let data = format!("{mark} 00000000000000ff");
        let path = self.paths.mark(SLOT);
        self.client
            .set_data(&path, data.as_bytes(), None)
            .await
            .unwrap();
    }
    async fn stored(&self) -> u64 {
        match self.client.get_data(&self.paths.mark(SLOT)).await {
            Ok((d, _)) => idcar_lease::pool::tree::parse_mark(&d).unwrap(),
            Err(zk::Error::NoNode) => 0,
            Err(e) => panic!("{e}"),
        }
    }
    async fn delete_mark(&self) {
        self.client
            .delete(&self.paths.mark(SLOT), None)
            .await
            .unwrap();
    }
    async fn delete_witness(&self) {
        for path in [self.paths.witness(SLOT), self.paths.witnesses()] {
            self.client.delete(&path, None).await.unwrap();
        }
    }
    async fn witness(&self) -> u64 {
        match self.client.get_data(&self.paths.witness(SLOT)).await {
            Ok((d, _)) => idcar_lease::pool::tree::parse_mark(&d).unwrap_or(0),
            Err(zk::Error::NoNode) => 0,
            Err(e) => panic!("{e}"),
        }
    }
    async fn replace_pool(&self) {
        // As an operator and the next instance would: `params` deleted and recorded anew,
        // the old identity's node deleted by the one recording the new one.
        let old = self.identity().await;
        self.client
            .delete(&self.paths.params(), None)
            .await
            .unwrap();
        self.record_pool().await;
        self.client.delete(&old, None).await.unwrap();
    }
}
