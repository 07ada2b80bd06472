//! Decoding an ID into the fields the checker uses (its slot, cluster and tick).

use super::Setup;
use crate::load::to_bytes;

/// The decoded fields the checker uses.
pub(super) struct Fields {
    pub(super) slot: u64,
    pub(super) cluster: u64,
    pub(super) tick: u64,
}

/// The fields of the layouts the campaign runs most, read without building a JSON map
/// (a long run checks tens of millions of IDs).
fn fast_fields(setup: &Setup, id: u128) -> Option<(u64, u64, u64)> {
    use idcar_core::layout::{lable64, muid128, sno80, ugd60, uuid7};
    match setup.layout.name() {
        "lable64" => {
            let f = lable64::Fields::unpack(u64::try_from(id).ok()?).ok()?;
            Some((
                f.generator.into(),
                f.cluster.into(),
                f.timestamp_ms * 1_000_000,
            ))
        }
        "sno80" => {
            let bytes: [u8; sno80::WIDTH] = to_bytes(id, sno80::WIDTH).try_into().ok()?;
            let f = sno80::Fields::unpack(&bytes);
            Some((f.partition.into(), 0, f.unix_ns()))
        }
        "ugd60" => {
            let f = ugd60::Fields::unpack(u64::try_from(id).ok()?);
            let s = ugd60::EPOCH_S + u64::from(f.timestamp_s);
            Some((f.worker.into(), 0, s * 1_000_000_000))
        }
        "muid128" => {
            let f = muid128::Fields::unpack(id);
            let slot = f.medallion.wrapping_sub(setup.medallion_base);
            Some((slot, 0, f.timestamp * 1_000))
        }
        "uuid7" => {
            let f = uuid7::Fields::unpack(id)?;
            Some((
                f.slot.into(),
                f.cluster.into(),
                f.unix_ts_ms.checked_mul(1_000_000)?,
            ))
        }
        _ => None,
    }
}

/// The fields of `id` under `setup`'s layout: read directly for the layouts `fast_fields`
/// knows, else from the layout's own decoding.
pub(super) fn fields(setup: &Setup, id: u128) -> Result<Fields, String> {
    if let Some((slot, cluster, unix_ns)) = fast_fields(setup, id) {
        if let Some(tick) = setup.scheme.tick_at(unix_ns) {
            return Ok(Fields {
                slot,
                cluster,
                tick,
            });
        }
    }
    let bytes = to_bytes(id, setup.layout.width());
    let m = setup
        .layout
        .decode(&bytes)
        .map_err(|e| e.to_string())?
        .to_map();
    let num = |k: &str| m.get(k).and_then(|v| v.as_u64());
    let (slot, cluster) = match setup.layout.name() {
        "lable64" => (num("generator"), num("cluster")),
        "ugd60" => (num("worker"), Some(0)),
        "si53" => (num("MID"), Some(0)),
        "sno80" => (num("partition"), Some(0)),
        "muid128" => (
            num("medallion").map(|m| m.wrapping_sub(setup.medallion_base)),
            Some(0),
        ),
        "uuid7" => (num("slot"), num("cluster")),
        other => return Err(format!("no field map for layout {other}")),
    };
    let unix_ns = match setup.layout.name() {
        "muid128" => num("timestamp").map(|us| us * 1_000),
        _ => m
            .get("time")
            .and_then(|t| t.as_str())
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as u64),
    };
    let tick = unix_ns.and_then(|ns| setup.scheme.tick_at(ns));
    match (slot, cluster, tick) {
        (Some(slot), Some(cluster), Some(tick)) => Ok(Fields {
            slot,
            cluster,
            tick,
        }),
        _ => Err(format!("decoded fields missing in {m:?}")),
    }
}
