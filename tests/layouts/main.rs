//! Layouts other than lable64, end to end: served over both interfaces, decoded by the CLI,
//! negotiated through ZooKeeper.

#[path = "../common/mod.rs"]
mod common;
mod narrow;
mod probes;
mod sno80;
mod wide;

use common::zk::Zk;
use common::*;
use idcar::layout::{si53::Si53, Layout};
use std::collections::HashSet;
use std::time::Duration;

/// Fields of one binary ID through the layout's own decoder (the names the seed uses).
fn fields(layout: &dyn Layout, id: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    layout.decode(id).unwrap().to_map()
}

fn u(m: &serde_json::Map<String, serde_json::Value>, k: &str) -> u64 {
    m[k].as_u64().unwrap_or_else(|| panic!("{k} in {m:?}"))
}
