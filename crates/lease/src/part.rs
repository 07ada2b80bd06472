//! Which of an instance's leases this is (`--slots K`: K leases, each a [`Part`]), and what
//! an instance's leases share.

use crate::issuance::{Issuance, LeftBehind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// A random instance ID, 16 hex digits: one per process (its leases' owner records say which
/// process they are), and one per lease (a lease's own sessions, told from its siblings').
pub(crate) fn instance_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Which of an instance's leases this is: with `--slots K` an instance runs K leases, each
/// claiming, fencing, renewing and releasing one slot exactly as a lone lease does.
#[derive(Clone, Debug)]
pub struct Part {
    /// 0..`of`.
    pub index: u32,
    /// How many slots the instance holds at once.
    pub of: u32,
    /// Shared by the instance's parts: a slot lost by one may be claimed by another.
    pub written: Written,
    /// The parts holding a slot now (bit per index), shared by the instance's parts.
    holding: Arc<AtomicU64>,
    /// Woken when a part takes a slot (a waiting sibling may have become a spare).
    took: Arc<tokio::sync::Notify>,
    /// Random per instance, shared by its parts: in owner records with `--slots` above 1.
    pub process: Arc<str>,
    /// This part's own: what the service issued under its windows.
    pub issuance: Issuance,
    /// Shared by the instance's parts: what their holds left when their sessions ended, for a
    /// claim back by any of them.
    pub left: LeftBehind,
    /// Shared by the instance's parts: while it holds no slot, one part claims at a time.
    first: Arc<tokio::sync::Mutex<()>>,
    /// Whether every slot of the pool is held, as the instance's pool gauges last saw it
    /// (shared by its parts): holders then keep their marks within twice the horizon.
    pub full: Arc<watch::Sender<bool>>,
}

impl Default for Part {
    fn default() -> Part {
        Part::all(1).next().expect("one part")
    }
}

/// The highest mark this process wrote per slot whose lease was lost to a foreign write: a
/// new claim of that slot, by any of the instance's leases, starts above it.
#[derive(Clone, Debug, Default)]
pub struct Written(Arc<std::sync::Mutex<std::collections::BTreeMap<u32, u64>>>);

impl Written {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u32, u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that `mark` was written for `slot` (never lowers what is remembered).
    pub fn raise(&self, slot: u32, mark: u64) {
        let mut m = self.map();
        let w = m.entry(slot).or_default();
        *w = (*w).max(mark);
    }

    /// The highest mark remembered for `slot`.
    pub fn get(&self, slot: u32) -> Option<u64> {
        self.map().get(&slot).copied()
    }
}

impl Part {
    /// The instance's `of` parts, sharing what they remember of foreign writes and which of
    /// them hold a slot.
    pub fn all(of: u32) -> impl Iterator<Item = Part> {
        let written = Written::default();
        let holding = Arc::new(AtomicU64::new(0));
        let took = Arc::new(tokio::sync::Notify::new());
        let process: Arc<str> = instance_id().into();
        let full = Arc::new(watch::channel(false).0);
        let left = LeftBehind::default();
        let first = Arc::new(tokio::sync::Mutex::new(()));
        (0..of).map(move |index| Part {
            index,
            of,
            written: written.clone(),
            holding: holding.clone(),
            took: took.clone(),
            process: process.clone(),
            issuance: Issuance::default(),
            left: left.clone(),
            first: first.clone(),
            full: full.clone(),
        })
    }

    fn bit(&self) -> u64 {
        1 << (self.index % 64)
    }

    /// Says whether this part holds a slot (claimed, until its hold ends).
    pub(crate) fn set_holding(&self, holding: bool) {
        if holding {
            self.holding.fetch_or(self.bit(), Ordering::AcqRel);
            self.took.notify_waiters();
        } else {
            self.holding.fetch_and(!self.bit(), Ordering::AcqRel);
        }
    }

    /// Whether this part gives its slot back when an instance holding none waits for one: it
    /// holds a slot, another part of the instance does too, and it is the last of them (one
    /// part gives back at a time, and the instance keeps a slot).
    pub(crate) fn is_surplus(&self) -> bool {
        let h = self.holding.load(Ordering::Acquire);
        h & self.bit() != 0 && h & !self.bit() != 0 && h >> (self.index % 64) == 1
    }

    /// Returns once this part is a spare (at once if it is one now).
    pub(crate) async fn became_spare(&self) {
        loop {
            let took = self.took.notified();
            tokio::pin!(took);
            took.as_mut().enable();
            if self.is_spare() {
                return;
            }
            took.await;
        }
    }

    /// Waits until this part may claim as the instance's first: no other part of it claims
    /// while it holds no slot (its parts would take several slots of a pool where other
    /// instances then hold none; the one that takes a slot makes the others spares). `None`
    /// once this part is a spare (a sibling took a slot meanwhile): it claims as one.
    pub(crate) async fn claim_first(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.of == 1 || self.is_spare() {
            return None;
        }
        tokio::select! {
            guard = self.first.lock() => (!self.is_spare()).then_some(guard),
            () = self.became_spare() => None,
        }
    }

    /// How many of the instance's parts hold a slot now.
    pub(crate) fn holding_count(&self) -> u32 {
        self.holding.load(Ordering::Acquire).count_ones()
    }

    /// Whether another part of the instance holds a slot now: this one is then a spare that
    /// gives way to instances holding none when the pool is exhausted.
    pub(crate) fn is_spare(&self) -> bool {
        self.holding.load(Ordering::Acquire) & !self.bit() != 0
    }

    /// The slot this part prefers, given the slot the instance prefers first: the one
    /// `index` after it, if that is still in a pool of `pool`.
    pub fn prefer(&self, first: Option<u32>, pool: u32) -> Option<u32> {
        first
            .and_then(|f| f.checked_add(self.index))
            .filter(|s| *s < pool)
    }

    /// The first generation this part publishes: the parts of one process never publish
    /// the same generation, so one process's lease records tell its leases apart.
    pub fn first_generation(&self) -> u64 {
        u64::from(self.index) << 40
    }
}

#[cfg(test)]
mod tests {
    use super::Part;

    #[test]
    fn an_instances_parts_share_foreign_writes_and_know_their_siblings() {
        let parts: Vec<Part> = Part::all(3).collect();
        // Part 0 lost slot 5 to a foreign write after writing mark 900: part 2, claiming
        // slot 5 later, starts above it.
        parts[0].written.raise(5, 900);
        parts[0].written.raise(5, 700);
        assert_eq!(parts[2].written.get(5), Some(900));
        assert_eq!(parts[2].written.get(6), None);
        // Another instance shares nothing.
        assert_eq!(Part::default().written.get(5), None);

        assert!(!parts[1].is_spare(), "no part holds a slot yet");
        parts[0].set_holding(true);
        assert!(
            !parts[0].is_spare(),
            "its own slot does not make a part a spare"
        );
        assert!(parts[1].is_spare() && parts[2].is_spare());
        assert_eq!(parts[2].holding_count(), 1);
        parts[0].set_holding(false);
        assert!(!parts[1].is_spare());
        assert_eq!(parts[0].prefer(Some(62), 64), Some(62));
        assert_eq!(
            parts[2].prefer(Some(62), 64),
            None,
            "past the pool: no preference"
        );
        assert_eq!(parts[2].prefer(Some(u32::MAX), u32::MAX), None);
        assert_ne!(parts[1].first_generation(), parts[2].first_generation());
        assert_eq!(parts[0].process, parts[2].process);
        assert_ne!(parts[0].process, Part::default().process);
    }

    #[test]
    fn a_spare_gives_way_only_to_instances_holding_none() {
        use crate::pool::spare::spare_may_take;
        use crate::pool::tree::Owner;
        let owner = |process: Option<&str>, spare: bool| {
            let mut o = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
            o.process = process.map(str::to_string);
            o.spare = spare.then_some(true);
            Some(o)
        };
        let parts: Vec<Part> = Part::all(2).collect();
        let behind = [
            owner(None, false),
            owner(Some("p"), false),
            owner(Some("p"), false),
        ];
        // Not a spare: always takes.
        assert!(spare_may_take(&parts[1], 1, &behind));
        parts[0].set_holding(true);
        // Two instances holding none behind (one of one slot, one of several): two free
        // slots are not enough to take one, three are.
        assert!(!spare_may_take(&parts[1], 2, &behind));
        assert!(spare_may_take(&parts[1], 3, &behind));
        // Other hot instances' spares, and unreadable records, are no reason... except an
        // unreadable record counts as one instance holding none.
        let spares = [owner(Some("q"), true), owner(Some("r"), true)];
        assert!(spare_may_take(&parts[1], 1, &spares));
        assert!(!spare_may_take(&parts[1], 1, &[None]));
        assert!(spare_may_take(&parts[1], 1, &[]));
        // Its own instance's other parts behind it do not count, spare-marked or not.
        let own = Owner::for_this_process("s".into(), "i", None, &parts[0], 0);
        assert!(spare_may_take(
            &parts[1],
            1,
            &[Some(own.clone()), Some(own)]
        ));
    }

    #[test]
    fn a_slot_is_given_back_once_the_same_hungry_head_is_seen_twice() {
        use crate::pool::spare::give_back_now;
        use crate::pool::tree::Owner;
        let parts: Vec<Part> = Part::all(3).collect();
        let hungry = |key: &str| {
            let o = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
            Some((key.to_string(), Some(o)))
        };
        let mut seen = None;
        // Only part 0 holds: nothing is surplus.
        parts[0].set_holding(true);
        assert!(!parts[0].is_surplus());
        assert!(!give_back_now(&parts[0], true, hungry("a"), &mut seen));
        assert!(!give_back_now(&parts[0], true, hungry("a"), &mut seen));
        // Parts 0 and 2 hold: 2 (the last) is surplus, 0 is not.
        parts[2].set_holding(true);
        assert!(parts[2].is_surplus() && !parts[0].is_surplus());
        let mut seen = None;
        assert!(
            !give_back_now(&parts[2], true, hungry("a"), &mut seen),
            "seen once"
        );
        assert!(
            give_back_now(&parts[2], true, hungry("a"), &mut seen),
            "seen twice"
        );
        // Another head, a pool with room, or a head that is a spare: not yet.
        let mut seen = None;
        assert!(!give_back_now(&parts[2], true, hungry("a"), &mut seen));
        assert!(!give_back_now(&parts[2], true, hungry("b"), &mut seen));
        assert!(!give_back_now(&parts[2], false, hungry("b"), &mut seen));
        assert!(!give_back_now(&parts[2], true, hungry("b"), &mut seen));
        let mut spare = Owner::for_this_process("s".into(), "i", None, &Part::default(), 0);
        spare.spare = Some(true);
        let mut seen = None;
        for _ in 0..3 {
            let head = Some(("c".to_string(), Some(spare.clone())));
            assert!(!give_back_now(&parts[2], true, head, &mut seen));
        }
        // Our own instance's waiter at the head is no reason either.
        let mut own = Owner::for_this_process("s".into(), "i", None, &parts[1], 0);
        own.spare = None;
        let mut seen = None;
        for _ in 0..3 {
            let head = Some(("d".to_string(), Some(own.clone())));
            assert!(!give_back_now(&parts[2], true, head, &mut seen));
        }
    }
}
