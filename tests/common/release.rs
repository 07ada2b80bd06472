//! Which supported release of a store a test runs: a type parameter of the harness's stores
//! (`Zk<R>`, `Etcd<R>`, the newest when left out), so that the suites written over fixture types
//! (`conformance!`, `negotiation!`, `store_faults!`) run once more against the older release
//! with a line each. The releases themselves are pinned in `zk/lib.sh` and `etcd/lib.sh`, built
//! into the store cache by `tests/ensure-deps.sh`; a release that is not there fails the test.

/// A supported release of each store.
pub trait Release: Send + Sync + 'static {
    /// The name `zk/lib.sh` and `etcd/lib.sh` know it by.
    const WHICH: &'static str;
}

/// The newest supported release: ZooKeeper's and etcd's default everywhere.
pub struct Newest;

/// The older supported release of each store.
pub struct Older;

impl Release for Newest {
    const WHICH: &'static str = "newest";
}

impl Release for Older {
    const WHICH: &'static str = "older";
}
