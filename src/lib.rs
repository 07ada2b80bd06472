//! idcar: a unique-ID sidecar.
//!
//! The map of the crate, from the pure core outwards. The contributor's page, with each part's
//! invariants and what not to touch lightly, is `docs/architecture.md` in the repository.
//!
//! - [`layout`]: ID layouts (bit packing and text forms: `lable64`, `ugd60`, `si53`, `sno80`,
//!   `muid128`, `uuid7`) and per-request options ([`layout::RequestOptions`]: metabyte,
//!   transaction); pure, from the `idcar-core` crate, as are [`generator`] (the per-lease
//!   sequence state machine, time passed in) and `server::frame` (the binary frame).
//! - [`clock`], [`timer`]: the wall clock seam and precise sub-millisecond waits.
//! - [`lease`]: who may issue for which slot up to which time, from the `idcar-lease` crate. [`lease::protocol`] is the one
//!   lease protocol and **the uniqueness invariant**, over a store seam
//!   ([`lease::store::MarkStore`]); [`lease::pool`] is the one negotiation of a slot over a
//!   coordinating store's seam ([`lease::zk`]: ZooKeeper, [`lease::etcd`]: etcd);
//!   [`lease::local`] keeps a static slot's mark in a state file; [`lease::runtime`] runs
//!   them on their own thread.
//! - [`service`]: generator + lease + clock, the one entry point for issuing IDs.
//! - [`server`]: the Unix-socket API (HTTP/1.1 and a binary protocol) and the admin listener.
//! - [`metrics`]: every Prometheus metric, typed.
//! - [`cli`], [`config`], [`app`]: arguments, validated configuration, and the `serve` run;
//!   [`descriptors`]: the file-descriptor budget that keeps a reserve for the lease;
//!   [`panics`]: what a panic does in `serve` (logged, then abort).
//! - [`client`]: a small client for the socket, used by `idcar get`, examples and tests;
//!   [`probe`]: `idcar probe`, readiness and liveness for exec probes and healthchecks.

#![forbid(unsafe_code)]

pub mod app;
pub mod cli;
pub mod client;
pub mod clock;
pub mod config;
pub mod descriptors;
pub use idcar_core::{generator, layout};
pub use idcar_lease as lease;
pub mod metrics;
pub mod panics;
pub mod probe;
pub mod server;
pub mod service;
pub mod timer;
