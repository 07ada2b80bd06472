//! What the lease's store suites add to the test kit's stores: idcar's own clients of them.

use idcar_testkit::etcd::Etcd;
use idcar_testkit::release::Release;
use std::time::Duration;

/// idcar's own etcd client, connected to every member of `etcd`.
pub async fn etcd_client<R: Release>(etcd: &Etcd<R>) -> idcar_lease::etcd::Etcd {
    let access = idcar_lease::etcd::EtcdAccess::new(&etcd.endpoints(), None, None).unwrap();
    idcar_lease::etcd::Etcd::connect(&access, Duration::from_secs(2))
        .await
        .unwrap()
}
