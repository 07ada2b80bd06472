//! The pool's parameters and identity in the params object, and the stamping of every slot
//! object with the identity when it is recorded.
//!
//! A pool's identity is the params object's `uid`, which a deleted and recreated object never
//! gets again. Recording it: every slot object of the pool (those of an older, larger pool too)
//! is stamped with it in a compare-and-set that also reads its mark — from then on a holder of
//! the old identity fails its next write — and the missing ones of `0..pool_size` are created
//! stamped. The floor of every claim under the identity is the highest mark read so
//! ([`identity::floor_over`]), and the record goes into the params object last, in a
//! compare-and-set of it: a claimant that reads a record finds every slot stamped.

use super::api::{Kube, KubeError};
use super::objects::Names;
use super::objects::{self, annotate, annotation, IDENTITY, PARAMS, RECORDING, STAMP};
use super::session::KubeSession;
use super::view::RECHECK;
use crate::identity::{self, Record};
use crate::pool::{Negotiation, Recorded};
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::{BTreeMap, BTreeSet};

/// Slot objects stamped or created at once while a pool's identity is recorded.
const AT_ONCE: usize = 64;

/// The identity of a params object, as stamps carry it and [`Recorded::creation`] holds it.
pub fn identity_of(params: &Lease) -> (String, i64) {
    let uid = params.metadata.uid.as_deref().unwrap_or("");
    // 63 bits of the uid (random in every API server): the negotiation's number for it.
    let hex: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(16)
        .collect();
    let n = u64::from_str_radix(&hex, 16).unwrap_or(0) >> 1;
    (uid.to_string(), n as i64)
}

/// Whether the pool's params object (named by `names`) still carries identity `uid`, read
/// from etcd now: `Some(version)` of the object if it does; `None` once it is deleted or
/// replaced (the pool is recorded anew under another identity).
pub(crate) async fn still_recorded(
    kube: &Kube,
    names: &Names,
    uid: &str,
) -> Result<Option<String>, KubeError> {
    let found = kube
        .get("reading the pool's params object", names.params())
        .await?;
    Ok(found
        .filter(|p| identity_of(p).0 == uid)
        .map(|p| objects::version(&p).to_string()))
}

impl KubeSession {
    /// The recorded parameters, recording `data` first if the pool has none.
    pub(crate) async fn params(&self, data: &[u8]) -> Result<Option<Recorded>, KubeError> {
        let name = self.names.params();
        let found = match self.kube.get("reading the pool's parameters", name).await? {
            Some(l) => l,
            None => {
                let text = String::from_utf8_lossy(data).into_owned();
                let lease = objects::object(
                    &self.names,
                    name,
                    "params",
                    BTreeMap::from([(PARAMS.to_string(), text)]),
                );
                match self
                    .kube
                    .create("recording the pool's parameters", &lease)
                    .await
                {
                    Ok(l) => l,
                    Err(KubeError::Conflict(_)) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
        };
        let Some(params) = annotation(&found, PARAMS) else {
            return Err(KubeError::Fatal(format!(
                "{name} has no {PARAMS} annotation: it is not an idcar pool's; delete it or \
                 choose another --kube-prefix"
            )));
        };
        Ok(Some(Recorded {
            data: params.as_bytes().to_vec(),
            creation: identity_of(&found).1,
            version: 0,
        }))
    }

    /// Joins the identity of the params object `recorded` read, recording it first if no one
    /// has; `None` if the params object was replaced meanwhile. One session records at a time
    /// (named on the params object in a compare-and-set; one whose session is gone is taken
    /// over): a fleet starting on a new pool does not stamp every slot once per member. The
    /// record itself is the compare-and-set that counts, as before.
    pub(crate) async fn join_or_record(
        &self,
        neg: &Negotiation,
        recorded: &Recorded,
    ) -> Result<Option<(Record, String)>, KubeError> {
        let name = self.names.params();
        let mut conflicts = 0;
        // Each pass records, joins, takes the recording on, or waits (at most RECHECK) for the
        // session recording; the bound is a minute or more of waiting for one that never ends.
        for _ in 0..40 {
            let Some(params) = self.kube.get("reading the pool's identity", name).await? else {
                return Ok(None);
            };
            let (uid, creation) = identity_of(&params);
            if creation != recorded.creation {
                return Ok(None);
            }
            if let Some(r) = annotation(&params, IDENTITY) {
                return Record::parse(r.as_bytes())
                    .map(|r| Some((r, uid)))
                    .ok_or_else(|| KubeError::Fatal(identity::unreadable(name)));
            }
            let by = annotation(&params, RECORDING).filter(|by| *by != self.name);
            if let Some(by) = by {
                if self.recording(by).await? {
                    // Wait for its record (or its end): a change of the params object as this
                    // process's copy shows it, or a look at the recorder again.
                    let read = objects::version_number(&params).map_err(KubeError::Fatal)?;
                    let change = self.view.until(read, RECHECK, move |v| {
                        v.params
                            .as_deref()
                            .is_none_or(|p| objects::version_number(p).unwrap_or(0) > read)
                    });
                    change.await;
                    continue;
                }
            }
            let params = if by.is_some() || annotation(&params, RECORDING).is_none() {
                let take = annotate(
                    objects::version(&params),
                    &[(RECORDING, Some(self.name.clone()))],
                );
                match self
                    .kube
                    .patch("taking the recording of the pool's identity on", name, take)
                    .await
                {
                    Ok(p) => p,
                    Err(KubeError::Conflict(_)) | Err(KubeError::NotFound(_)) => continue,
                    Err(e) => return Err(e),
                }
            } else {
                params
            };
            let (used, highest) = self.stamp_every_slot(neg, &uid).await?;
            let not_before = identity::floor_over(used, highest, neg.proto.horizon_ahead());
            let rec = Record {
                format: identity::FORMAT,
                not_before,
                pool_size: neg.cfg.pool_size,
                recorded_ms: neg.proto.clock.now_unix_ns() / 1_000_000,
            };
            let json = String::from_utf8(rec.to_json()).expect("a record is JSON");
            let patch = annotate(
                objects::version(&params),
                &[(IDENTITY, Some(json)), (RECORDING, None)],
            );
            match self
                .kube
                .patch("recording the pool's identity", name, patch)
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        identity = %uid,
                        not_before,
                        pool_size = neg.cfg.pool_size,
                        "recorded the pool's identity; every claim under it starts above the highest mark in the pool"
                    );
                    return Ok(Some((rec, uid)));
                }
                Err(KubeError::Conflict(_)) | Err(KubeError::NotFound(_)) => {
                    conflicts += 1;
                    if conflicts >= 5 {
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(KubeError::Unavailable(format!(
            "{name}: its identity is not recorded yet (another session records it, or the \
             object keeps changing)"
        )))
    }

    /// Whether the session `by` (named as recording the identity) is live as this process's
    /// copy of the pool shows it: there, and not seen unrenewed for its duration.
    async fn recording(&self, by: &str) -> Result<bool, KubeError> {
        let view = self.snapshot().await?;
        Ok(view.sessions.contains_key(by) && view.judged.alive.contains(by))
    }

    /// Stamps every slot object of the pool with `uid` (reading its mark in the same step) and
    /// creates the missing ones of the pool, [`AT_ONCE`] at a time: whether any slot object was
    /// there, and the highest mark read.
    async fn stamp_every_slot(
        &self,
        neg: &Negotiation,
        uid: &str,
    ) -> Result<(bool, u64), KubeError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let (slots, _) = self
            .kube
            .list("listing the slots", &self.names.role("slot"))
            .await?;
        let used = !slots.is_empty();
        let there: BTreeSet<u32> = slots
            .iter()
            .filter_map(|l| self.names.slot_of(objects::name(l)))
            .collect();
        let stamped = stream::iter(slots.into_iter().map(|slot| self.stamp(slot, uid)))
            .buffer_unordered(AT_ONCE)
            .try_fold(0, |high, mark| async move { Ok(high.max(mark)) });
        let missing: Vec<u32> = (0..neg.cfg.pool_size)
            .filter(|n| !there.contains(n))
            .collect();
        let created = stream::iter(missing.into_iter().map(|n| self.create_slot(n, uid)))
            .buffer_unordered(AT_ONCE)
            .try_fold(0, |high, mark| async move { Ok(high.max(mark)) });
        let (a, b) = (stamped.await?, created.await?);
        Ok((used, a.max(b)))
    }

    /// Creates slot `n` stamped with `uid`: 0, or the mark of the one found there (created by
    /// another recorder, or by an older pool's), stamped as found.
    async fn create_slot(&self, n: u32, uid: &str) -> Result<u64, KubeError> {
        let name = self.names.slot(n);
        let lease = objects::object(
            &self.names,
            &name,
            "slot",
            BTreeMap::from([(STAMP.to_string(), uid.to_string())]),
        );
        match self.kube.create("creating a slot", &lease).await {
            Ok(_) => Ok(0),
            Err(KubeError::Conflict(_)) => match self.kube.get("reading a slot", &name).await? {
                Some(slot) => self.stamp(slot, uid).await,
                None => Ok(0),
            },
            Err(e) => Err(e),
        }
    }

    /// Stamps one slot object with `uid` in a compare-and-set: its mark then (an unreadable
    /// mark stops the recording: it would be the floor).
    async fn stamp(&self, mut slot: Lease, uid: &str) -> Result<u64, KubeError> {
        let name = objects::name(&slot).to_string();
        for _ in 0..10 {
            let mark = objects::mark(&slot).map_err(KubeError::Fatal)?.0;
            let mark = mark.max(objects::witness(&slot));
            if annotation(&slot, STAMP) == Some(uid) {
                return Ok(mark);
            }
            let patch = annotate(objects::version(&slot), &[(STAMP, Some(uid.to_string()))]);
            match self.kube.patch("stamping a slot", &name, patch).await {
                Ok(_) => return Ok(mark),
                Err(KubeError::Conflict(_)) => {}
                Err(KubeError::NotFound(_)) => return Ok(0),
                Err(e) => return Err(e),
            }
            match self.kube.get("reading a slot", &name).await? {
                Some(s) => slot = s,
                None => return Ok(0),
            }
        }
        Err(KubeError::Unavailable(format!(
            "{name} keeps changing while the pool's identity is recorded"
        )))
    }
}
