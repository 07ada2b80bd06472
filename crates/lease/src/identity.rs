//! A pool's identity: what makes "the pool these marks belong to" something that cannot be
//! recreated equal by accident.
//!
//! The instances of one pool must agree on everything that shapes its IDs (the layout and its
//! parameters, recorded in `params` and checked at each agreement) and on its size. Agreement
//! at the moment of a claim is not enough: an operator who deletes `params` "to change a
//! parameter" lets the next instance record other parameters while the old holders go on
//! issuing. So a pool's identity is *the creation of its `params` record* — ZooKeeper's
//! creation id (`czxid`) of the node, etcd's `create_revision` of the key, neither of which a
//! deleted-and-recreated record ever gets again — and:
//!
//! - every mark write and every claim is conditional on it (ZooKeeper: a `multi` that checks
//!   `identity/<id>`, which whoever records a new identity deletes first; etcd: a compare on
//!   `params`' `create_revision`), so a holder of a replaced pool stops at its next write;
//! - the identity's record (`identity/<id>`, JSON, this type) holds the pool's size and a
//!   floor (`not-before`): the highest mark in the pool when the identity was recorded, and
//!   at least one horizon past the recording instance's clock if the pool held any mark
//!   ([`floor_over`]). Every claim made under it starts above that, so an instance that
//!   records a new identity over a pool that still holds marks (the old holders may go on
//!   issuing until their next write fails, never past their marks) issues nothing until the
//!   clock is past every one of them — nor past marks a snapshot restore rolled back;
//! - an instance whose parameters or pool size differ is refused at start, naming the flag;
//!   one that finds the pool replaced under it stops issuing at once, says why on `/readyz`,
//!   and agrees again (joining the new pool if its flags agree, not ready saying why if not).
//!
//! `--lease-horizon` and `--max-clock-wait` are not part of it: a mark further ahead than an
//! instance expects is waited for, never fatal, so instances of one pool may differ in both.

use serde::{Deserialize, Serialize};

/// The store format this idcar reads and writes: the shape of every entry of a pool's
/// namespace (`params`, `identity/`, `queue/`, `slots/`, `marks/`, `witness/`, `wanted/`; see
/// `crate::pool::tree`). Recorded in the identity record (`format`; a record without one
/// was written by idcar 0.1, which wrote format 1) and in every owner record. A later format is
/// introduced by recording the pool anew: `params` recreated with a `"format"` entry, and an
/// identity record carrying it. Recreating `params` fences every holder of the old pool in
/// both stores (ZooKeeper: its identity record is deleted; etcd: `params`' revisions change);
/// an instance that reads only older formats then refuses to join, naming both formats
/// (idcar 0.1, which knows no formats, refuses the unknown `format` parameter), and never
/// records a pool over a newer one.
pub const FORMAT: u32 = 1;

/// The format of a record that names none: idcar 0.1 wrote format 1 without saying so.
pub(crate) fn format_1() -> u32 {
    1
}

/// Whether this idcar reads records of store format `format` (false: a newer one).
pub fn reads(format: u32) -> bool {
    format <= FORMAT
}

/// The record of a pool's identity (`identity/<id>`, JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The pool's store format ([`FORMAT`] when this idcar recorded it; 1 when absent).
    #[serde(default = "format_1")]
    pub format: u32,
    /// The highest mark in the pool when this identity was recorded: no claim under it
    /// issues a tick at or below this.
    #[serde(rename = "not-before")]
    pub not_before: u64,
    /// How many slots the pool negotiates (`--pool-size`).
    #[serde(rename = "pool-size")]
    pub pool_size: u32,
    /// When it was recorded (Unix ms, the recording instance's clock), for people.
    #[serde(rename = "recorded-ms", default)]
    pub recorded_ms: u64,
}

impl Record {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an identity record serialises")
    }

    /// The record in `data`, or `None` if it is unreadable. A record of a newer format than
    /// [`FORMAT`] is not read past its `format`: it comes back with that format and a floor
    /// no claim ever reaches (see [`newer_format`], which refuses it first).
    pub fn parse(data: &[u8]) -> Option<Record> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default = "format_1")]
            format: u32,
        }
        let head: Head = serde_json::from_slice(data).ok()?;
        if !reads(head.format) {
            return Some(Record {
                format: head.format,
                not_before: u64::MAX,
                pool_size: 0,
                recorded_ms: 0,
            });
        }
        serde_json::from_slice(data).ok()
    }
}

/// Why an instance cannot join a pool kept in store format `theirs` (newer than [`FORMAT`]).
pub fn newer(what: &str, theirs: &str) -> String {
    format!(
        "{what} is in store format {theirs}, written by a newer idcar; this idcar ({}) reads \
         format {FORMAT} and refuses to join rather than misread it: run a version that reads \
         format {theirs} (see the operations guide, \"Upgrading and rolling back\")",
        env!("CARGO_PKG_VERSION")
    )
}

/// Why an instance cannot join the pool of identity record `rec` (read at `key`), if its
/// format is newer than this idcar reads.
pub fn newer_format(rec: &Record, key: &str) -> Option<String> {
    (!reads(rec.format)).then(|| {
        newer(
            &format!("the pool of {key} (by its identity record)"),
            &rec.format.to_string(),
        )
    })
}

/// Why an instance cannot join a pool whose `params` record (JSON) says it is of a newer
/// format (`"format"`: a format-1 record has none, or `"1"`).
pub fn newer_params(params: &[u8], key: &str) -> Option<String> {
    let map: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(params).ok()?;
    let theirs = match map.get("format")? {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    (theirs != FORMAT.to_string()).then(|| newer(&format!("the pool ({key})"), &theirs))
}

/// The pool an instance agreed to join: its identity's record, and the floor every claim
/// starts above.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreed {
    /// Where the identity's record is (ZooKeeper: the node every write checks); empty: none
    /// (a planted bug, for the campaign).
    pub id: String,
    pub not_before: u64,
}

/// The identity of a `params` record created at `creation` (ZooKeeper's czxid, etcd's
/// create revision) and last written at `version` (ZooKeeper's version, etcd's mod
/// revision): recreated or rewritten, it is another pool.
pub fn id_of(creation: i64, version: i64) -> String {
    format!("{creation:016x}-{version}")
}

/// The floor of every claim under a new identity, given whether the pool was ever used (it
/// holds a mark or an identity record) and its highest mark: above every mark, and one horizon
/// of this instance past its clock — the holders of the old identity may have written marks
/// that a snapshot restore or a script took away, and may go on issuing until their next write
/// fails, never past their clock plus their horizon (give the instance that records a new
/// identity the pool's longest `--lease-horizon`; `horizon_ahead`: the tick one horizon past
/// this instance's clock now). 0 for a pool never used.
pub fn floor_over(used: bool, highest: u64, horizon_ahead: u64) -> u64 {
    if !used {
        return 0;
    }
    highest.max(horizon_ahead)
}

/// How a pool whose record is unreadable is refused.
pub fn unreadable(key: &str) -> String {
    format!(
        "the pool's identity record {key} is unreadable; it holds the floor that keeps IDs \
         unique after the pool's parameters were recorded anew: repair it, or record the pool \
         anew (see the operations guide)"
    )
}

/// What differs between this instance's pool size and the recorded one, naming the flag.
pub fn pool_size_mismatch(rec: &Record, ours: u32) -> Option<String> {
    (rec.pool_size != ours).then(|| {
        format!(
            "--pool-size: the pool has {}, this instance {ours}",
            rec.pool_size
        )
    })
}

/// The message of an instance that disagrees with the pool it would join.
/// (Never "another root for a separate pool": two pools of one layout and cluster hand out
/// the same generators.)
pub fn disagrees(key: &str, why: &str) -> String {
    format!(
        "this instance's parameters differ from those of the pool it would join ({key}): \
         {why}. Instances of one pool must share every parameter that shapes its IDs, or they \
         could issue the same IDs: give this instance the pool's flags, or (for a layout with a \
         cluster ID) a cluster ID of its own"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_name_the_pool_size() {
        let r = Record {
            format: FORMAT,
            not_before: 123,
            pool_size: 64,
            recorded_ms: 5,
        };
        assert_eq!(Record::parse(&r.to_json()), Some(r.clone()));
        assert_eq!(
            String::from_utf8(r.to_json()).unwrap(),
            r#"{"format":1,"not-before":123,"pool-size":64,"recorded-ms":5}"#
        );
        assert!(Record::parse(b"junk").is_none());
        assert_eq!(pool_size_mismatch(&r, 64), None);
        assert_eq!(
            pool_size_mismatch(&r, 8).unwrap(),
            "--pool-size: the pool has 64, this instance 8"
        );
        assert_eq!(id_of(0x1f, 2), "000000000000001f-2");
    }

    #[test]
    fn a_record_without_a_format_is_format_1_and_a_newer_one_is_refused_unread() {
        // What idcar 0.1 wrote.
        let old = Record::parse(br#"{"not-before":7,"pool-size":8,"recorded-ms":1}"#).unwrap();
        assert_eq!((old.format, old.not_before, old.pool_size), (1, 7, 8));
        assert_eq!(newer_format(&old, "k"), None);
        // A later format, whatever else it holds (here a floor this idcar must not trust).
        let new = Record::parse(br#"{"format":2,"not-before":"soon","pool-size":8}"#).unwrap();
        assert_eq!((new.format, new.not_before), (2, u64::MAX));
        let why = newer_format(&new, "/idcar/lable64/0/identity/x").unwrap();
        assert!(why.contains("store format 2"), "{why}");
        assert!(why.contains("reads format 1"), "{why}");
        assert!(why.contains("/idcar/lable64/0/identity/x"), "{why}");
        // Parameters: none or "1" is this format; anything else is refused.
        assert_eq!(newer_params(br#"{"layout":"lable64"}"#, "p"), None);
        assert_eq!(
            newer_params(br#"{"layout":"lable64","format":"1"}"#, "p"),
            None
        );
        assert!(newer_params(br#"{"layout":"lable64","format":"2"}"#, "p")
            .unwrap()
            .contains("store format 2"));
        assert!(newer_params(br#"{"format":3}"#, "p")
            .unwrap()
            .contains("store format 3"));
    }
}
