//! The pieces etcd transactions and ranges are made of, for every part of the etcd store:
//! compares, puts, gets and deletes of one key, the key-values a range of a transaction read,
//! and the keys of a pool's directory.

use idcar_etcd_api::etcdserverpb as rpc;
use idcar_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use idcar_etcd_api::etcdserverpb::request_op::Request;

pub(crate) fn cmp(key: &str, target: CompareTarget, value: TargetUnion) -> rpc::Compare {
    rpc::Compare {
        result: CompareResult::Equal as i32,
        target: target as i32,
        key: key.as_bytes().to_vec(),
        range_end: Vec::new(),
        target_union: Some(value),
    }
}

/// `key` was created and never deleted since (`create_revision` 0: it does not exist).
pub(crate) fn absent(key: &str) -> rpc::Compare {
    cmp(key, CompareTarget::Create, TargetUnion::CreateRevision(0))
}

pub(crate) fn put(key: &str, value: Vec<u8>, lease: i64) -> rpc::RequestOp {
    rpc::RequestOp {
        request: Some(Request::RequestPut(rpc::PutRequest {
            key: key.as_bytes().to_vec(),
            value,
            lease,
            ..Default::default()
        })),
    }
}

pub(crate) fn get(key: &str) -> rpc::RequestOp {
    rpc::RequestOp {
        request: Some(Request::RequestRange(rpc::RangeRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        })),
    }
}

pub(crate) fn delete(key: &str) -> rpc::RequestOp {
    rpc::RequestOp {
        request: Some(Request::RequestDeleteRange(rpc::DeleteRangeRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        })),
    }
}

/// The key-values a range operation of a transaction's answer read.
pub(crate) fn range_kvs(
    r: &rpc::TxnResponse,
    index: usize,
) -> Vec<idcar_etcd_api::mvccpb::KeyValue> {
    match r.responses.get(index).and_then(|o| o.response.as_ref()) {
        Some(rpc::response_op::Response::ResponseRange(rr)) => rr.kvs.clone(),
        _ => Vec::new(),
    }
}

/// The prefix of `dir`'s keys.
pub(super) fn prefix(dir: &str) -> String {
    format!("{dir}/")
}

/// The slot number of a key under `dir`.
pub(super) fn slot_of(key: &[u8], dir: &str) -> Option<u32> {
    std::str::from_utf8(key)
        .ok()?
        .strip_prefix(&prefix(dir))?
        .parse()
        .ok()
}

/// A range over every key under `dir`.
pub(super) fn range(dir: &str) -> rpc::RangeRequest {
    let p = prefix(dir);
    rpc::RangeRequest {
        range_end: prefix_end(p.as_bytes()),
        key: p.into_bytes(),
        ..Default::default()
    }
}

/// The first key after every key starting with `prefix` (etcd's `range_end` for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last < 0xff {
            *end.last_mut().expect("not empty") += 1;
            return end;
        }
        end.pop();
    }
    vec![0]
}
