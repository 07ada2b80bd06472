//! etcd's v3 API, client side, as generated from `proto/` (etcd's own `.proto` files) by
//! tonic and prost. The generated code is checked in, so building needs no `protoc`;
//! `tests/generated.rs` regenerates it and fails if anything differs (and, with
//! `IDCAR_REGENERATE=1`, writes the new code).
#![allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]

// Left as generated (rustfmt would reformat it, and the check above compares it byte for byte).
#[rustfmt::skip]
pub mod authpb;
#[rustfmt::skip]
pub mod etcdserverpb;
#[rustfmt::skip]
pub mod mvccpb;
