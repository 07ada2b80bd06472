//! etcd's v3 API as generated from `etcd/proto/` by `etcd/gen-proto.sh` (client side only).
#![allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]

pub mod authpb;
pub mod etcdserverpb;
pub mod mvccpb;
