//! The store seam: what a store does for one slot's mark, so that one protocol
//! ([`crate::protocol`], where the invariant is stated and kept) runs over every store.
//! A store implements [`MarkStore`]; how it hands out slots (a static one, a queue, probes)
//! is its own business, outside the seam.

use std::future::Future;

/// A slot's mark as stored, with the version a compare-and-set must name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored<V> {
    pub mark: u64,
    pub version: V,
    /// The token of the claim whose write put `mark` there, where the store keeps one and the
    /// mark is what that write put (`None`: unknown, never written, or raised by the slot's
    /// witness above the mark itself).
    pub by: Option<u64>,
}

impl<V> Stored<V> {
    /// Raised to the slot's `witness` (the copy every mark write also sets) when that is
    /// higher: the floor is then the witness's, and no write of the mark's is what it reads.
    pub fn raise_to_witness(&mut self, witness: u64) {
        if witness > self.mark {
            self.mark = witness;
            self.by = None;
        }
    }
}

/// Why a store operation failed, as the protocol must treat it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Someone else wrote the mark, or our claim on the slot is gone: stop issuing at once.
    #[error("{0}")]
    Conflict(String),
    /// The store's session ended: every claim made in it is gone.
    #[error("{0}")]
    SessionGone(String),
    /// The store refused our identity mid-session (a password rotated, a permission revoked):
    /// taken as the session's end, and the next one waits a pause.
    #[error("{0}")]
    Refused(String),
    /// Cannot reach or write the store now (the write may still have been applied): the mark
    /// already written stays in force.
    #[error("{0}")]
    Unavailable(String),
}

/// What a store does for one slot: the seam between [`hold`] and where marks are kept.
///
/// A new store implements this (one file) and adds one line to the conformance suite
/// (`crates/lease/tests/lease_conformance/`). How a store hands out slots (a static one, a queue, probes)
/// is not part of it: its caller claims, builds a [`Claim`] and runs [`hold`].
pub trait MarkStore: Send + Sync {
    /// What changes with every write of a mark, for compare-and-set.
    type Version: Copy + Eq + std::fmt::Debug + Send + Sync;

    /// The store, for messages: "ZooKeeper", "the state file".
    fn name(&self) -> &'static str;

    /// Where slot `slot`'s mark is kept, for messages.
    fn key(&self, slot: u32) -> String;

    /// Reads the slot's mark and its version; a mark never written reads as 0.
    fn read(
        &self,
        slot: u32,
    ) -> impl Future<Output = Result<Stored<Self::Version>, StoreError>> + Send;

    /// Writes `mark` with the claim's token if and only if the mark is still at
    /// `claim.version` and the claim is still ours; the new version.
    fn write(
        &self,
        claim: &Claim<Self::Version>,
        mark: u64,
    ) -> impl Future<Output = Result<Self::Version, StoreError>> + Send;

    /// After writes whose replies were lost: if the mark holds one of `attempts` written with
    /// this claim's token (and the claim is still ours), that write's version and value;
    /// `Ok(None)` if it does not; an error if the store could not be read (then nothing is
    /// known: a mark that moved may still be ours).
    fn own_write(
        &self,
        claim: &Claim<Self::Version>,
        attempts: &[u64],
    ) -> impl Future<Output = Result<Option<(Self::Version, u64)>, StoreError>> + Send;

    /// Writes `mark` as [`MarkStore::write`] does and lets the slot go, atomically.
    fn write_down(
        &self,
        claim: &Claim<Self::Version>,
        mark: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// After a loss: lets go of the slot if the claim is still ours (no mark is written).
    fn give_back(&self, slot: u32) -> impl Future<Output = ()> + Send;

    /// Resolves when the slot's mark may no longer be at `version` — written or deleted by
    /// someone else, or by a write of ours — so that a holder that writes seldom still writes
    /// a lowered mark back at once. A store without a watch never resolves (its holders find
    /// out at their next write); a spurious resolution costs one [`MarkStore::recheck`].
    fn changed(
        &self,
        _slot: u32,
        _version: Self::Version,
    ) -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }

    /// After a compare-and-set failed: whether the pool this claim was made in is still the
    /// one recorded, whether the claim is still ours, and the mark as stored now. The
    /// protocol decides what follows.
    fn recheck(
        &self,
        claim: &Claim<Self::Version>,
    ) -> impl Future<Output = Result<Recheck<Self::Version>, StoreError>> + Send;
}

/// What [`MarkStore::recheck`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recheck<V> {
    /// The claim on the slot is still ours; the mark as stored now, with the version a write
    /// must name (a missing or unreadable mark reads 0, with the version that recreates it).
    Ours(Stored<V>),
    /// The claim is gone: the slot is free or another holder's.
    Gone,
    /// The pool's identity the claim was made under is gone: its recorded parameters were
    /// deleted or recreated (why, for the log and readiness).
    PoolReplaced(String),
}

/// A claim on one slot, as its holder knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim<V> {
    pub slot: u32,
    /// The mark read when the slot was claimed: this holder issues only ticks above it.
    pub floor: u64,
    /// The mark as stored by this holder's last write (the floor until the first write).
    pub mark: u64,
    /// The highest tick the generator may use under this claim (the window last published;
    /// the floor until the first): every tick issued is at or below it, and it never passes
    /// `mark`.
    pub window: u64,
    /// The mark's version after this holder's last write (or as read at the claim).
    pub version: V,
    /// Random per claim, written with every mark: how [`MarkStore::own_write`] knows ours.
    pub token: u64,
}

impl<V> Claim<V> {
    /// Starts this claim above `at_least` too: a mark this process wrote for the slot before
    /// (a lease of it lost to a foreign write, which may have lowered the stored mark).
    pub fn raise_floor(&mut self, at_least: u64) {
        self.floor = self.floor.max(at_least);
        self.mark = self.mark.max(self.floor);
        self.window = self.window.max(self.floor);
    }

    /// The token as stores write it: 16 hex digits.
    pub fn token_hex(&self) -> String {
        format!("{:016x}", self.token)
    }
}
