//! idcar's lease: who may issue IDs for which slot, and up to which time.
//!
//! From outside, a program names the store its pool lives in once, as a [`StoreSpec`]
//! (features `zk`, `etcd`), and starts leases in it ([`StoreSpec::start`]) or reads the pool's
//! report ([`StoreSpec::report`]); a static slot is [`local::start`]. Every lease's metrics
//! are [`metrics::LeaseMetrics`], registered in the registry the program exports.
//!
//! A lease is a maintainer task that claims a slot, keeps its time mark ahead of the clock
//! and publishes what it holds on a `watch` channel as a [`LeaseState`]. The service follows
//! that channel and installs each [`Window`] in the generator. [`LeaseHandle::release`] hands
//! the task the highest tick issued so it can write the mark down before letting go.
//!
//! Two seams, each with one implementation of what is done over it:
//!
//! - [`protocol`] is the one lease protocol — wait past the mark, write ahead by
//!   compare-and-set, publish, renew, lapse, release — and the invariant it keeps, over the
//!   mark seam ([`store::MarkStore`]);
//! - [`pool`] is the one negotiation of a slot — session loop, parameter agreement, queue,
//!   claim, hold, claim again — over the seam of a coordinating store ([`pool::Store`],
//!   [`pool::Session`]).
//!
//! The stores: [`local`] (a static slot, its mark in a state file: a `MarkStore` only),
//! [`zk`] (ZooKeeper: marks in znodes, slots negotiated in a session) and [`etcd`] (etcd:
//! marks in keys, slots negotiated under an etcd lease); [`tls`] is the certificate and
//! credential files both negotiating stores read. [`stop`] ends any wait on the release
//! request or a session's end. Testing aids (planted bugs, starved renewals) act only in
//! builds with the feature `fault-injection`.

#![forbid(unsafe_code)]
// The negotiation's seam is filled by the stores behind features: built with none (the protocol
// and the state-file store alone), its parts are compiled and unit-tested but not called.
#![cfg_attr(not(any(feature = "zk", feature = "etcd")), allow(dead_code))]

#[cfg(feature = "etcd")]
pub mod etcd;
mod handle;
pub mod identity;
pub mod issuance;
#[cfg(feature = "kube")]
pub mod kube;
pub mod local;
pub mod metrics;
pub mod pace;
mod part;
pub mod planted;
pub mod pool;
pub mod protocol;
pub mod repeated;
pub mod retry;
pub mod runtime;
#[cfg(any(feature = "zk", feature = "etcd"))]
pub mod spec;
mod statefile;
pub mod stop;
pub mod store;
mod timing;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "zk")]
pub mod zk;

pub use issuance::{Issuance, Left, LeftBehind};
pub use protocol::Protocol;
#[cfg(any(feature = "zk", feature = "etcd"))]
pub use spec::{ReportError, StoreSpec};

pub use handle::{LeaseError, LeaseHandle, LeaseState, Leases, GAVE_BACK};
pub use idcar_core::generator::{Issued, Window};
pub use part::{Part, Written};
pub use timing::Timing;
