//! A layout's time and sequence geometry: ticks, the epoch, the sequence range, the pool's
//! size. Pure arithmetic; what the generator and the lease need of a layout.

/// The time and sequence geometry of a layout: what the generator and the lease need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheme {
    /// Length of one tick in nanoseconds (1 ms for lable64).
    pub tick_ns: u64,
    /// The layout's epoch, in nanoseconds since the Unix epoch.
    pub epoch_unix_ns: u64,
    /// The largest tick the time field can hold.
    pub max_tick: u64,
    /// Smallest sequence number issued within a tick.
    pub seq_min: u32,
    /// Largest sequence number issued within a tick (inclusive).
    pub seq_max: u32,
    /// How many slots (generator IDs) the pool has per cluster.
    pub slots: u32,
    /// sno80's tick-tock bit: on a clock regression the generator switches to the other of
    /// two timelines instead of running ahead, when that timeline is unused at the current time.
    pub tick_tock: bool,
    /// How many ticks the generator may issue ahead of the wall clock (within the lease mark)
    /// when a tick's sequence is spent. 0 waits for the next tick; muid128, one ID per
    /// microsecond, borrows up to a millisecond so a batch is not a thousand separate waits.
    pub lead_ticks: u64,
}

impl Scheme {
    /// The tick that contains `unix_ns`, or `None` before the epoch.
    pub fn tick_at(&self, unix_ns: u64) -> Option<u64> {
        unix_ns
            .checked_sub(self.epoch_unix_ns)
            .map(|d| d / self.tick_ns)
    }

    /// Nanoseconds since the Unix epoch at which `tick` starts (saturating).
    pub fn tick_start_ns(&self, tick: u64) -> u64 {
        tick.saturating_mul(self.tick_ns)
            .saturating_add(self.epoch_unix_ns)
    }

    /// How long from `now_unix_ns` until the clock is past tick `mark` (zero if it is).
    pub fn wait_past(&self, mark: u64, now_unix_ns: u64) -> std::time::Duration {
        let past = self.tick_start_ns(mark.saturating_add(1));
        std::time::Duration::from_nanos(past.saturating_sub(now_unix_ns))
    }

    /// When the time field runs out: the start of the first tick it cannot hold, in
    /// nanoseconds since the Unix epoch (saturating). No ID can be issued from then on.
    pub fn end_unix_ns(&self) -> u64 {
        self.tick_start_ns(self.max_tick.saturating_add(1))
    }

    /// IDs one slot can issue per tick.
    pub fn ids_per_tick(&self) -> u64 {
        u64::from(self.seq_max - self.seq_min) + 1
    }

    /// Whole ticks in `d`, rounded up (a horizon shorter than a tick still covers one).
    pub fn ticks_in(&self, d: std::time::Duration) -> u64 {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        ns.div_ceil(self.tick_ns).max(1)
    }
    /// How much longer than a horizon the clock may need to pass a mark written that far
    /// ahead: the rest of the tick it was written in, and the mark's own tick.
    pub fn rounding_slack(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.tick_ns.saturating_mul(2))
    }
}
