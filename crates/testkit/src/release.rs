//! Which supported release of a store a test runs: a type parameter of the harness's stores
//! (`Zk<R>`, `Etcd<R>`, the newest when left out), so that the suites written over fixture types
//! (`conformance!`, `negotiation!`, `store_faults!`) name both releases of a store in their
//! line, and each of their tests runs its scenario against both at once
//! ([`newest_and_older`]). The releases themselves are pinned in `zk/lib.sh` and `etcd/lib.sh`,
//! made in the store cache by `tests/ensure-deps.sh`; a release that is not there fails the
//! test.

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

/// Runs one scenario against the newest release and the older one at once, each on a thread and
/// a runtime of its own (the runtime `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`
/// gives a test): the store suites' scenarios mostly wait, so the older release adds little to a
/// suite's time. Both run to their end; then it panics, naming the release, if either did.
pub fn newest_and_older<N, O, FN, FO>(newest: N, older: O)
where
    N: FnOnce() -> FN + Send,
    O: FnOnce() -> FO + Send,
    FN: std::future::Future<Output = ()>,
    FO: std::future::Future<Output = ()>,
{
    fn on_runtime<F: std::future::Future<Output = ()>>(scenario: impl FnOnce() -> F) {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(scenario())
    }
    let failures: Vec<String> = std::thread::scope(|s| {
        let thread = |which: &str| std::thread::Builder::new().name(which.to_string());
        let runs = [
            (
                Newest::WHICH,
                thread(Newest::WHICH).spawn_scoped(s, || on_runtime(newest)),
            ),
            (
                Older::WHICH,
                thread(Older::WHICH).spawn_scoped(s, || on_runtime(older)),
            ),
        ];
        runs.into_iter()
            .filter_map(|(which, run)| {
                let panic = run.expect("a thread").join().err()?;
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Some(format!("the {which} release: {text}"))
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One `#[test]` per scenario named, each running `super::NAME::<$newest>()` and
/// `super::NAME::<$older>()` at once ([`newest_and_older`]): a store suite's tests for one store
/// and its two supported releases, in a module of their own beside the scenarios.
#[macro_export]
macro_rules! newest_and_older_tests {
    ($newest:ty, $older:ty; $($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            $crate::release::newest_and_older(
                || super::$name::<$newest>(),
                || super::$name::<$older>(),
            )
        }
    )*};
}
