//! A lease's timings, as configured.

use std::time::Duration;

/// The timings of a lease.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How far ahead of the clock the generator's window reaches, and the mark while someone
    /// waits for a slot (`--lease-horizon`).
    pub horizon: Duration,
    /// How far ahead of the clock the mark reaches while no one waits (`--idle-horizon`; at or
    /// below `horizon`, the mark always follows the window).
    pub idle_horizon: Duration,
    /// How often the mark is pushed forward.
    pub renew_every: Duration,
    /// How long to wait for the clock to pass a claimed slot's mark before giving up.
    pub max_clock_wait: Duration,
    /// Testing aid (cargo feature `fault-injection`, `--starve-renewals`; ignored in other
    /// builds): every mark write is held back this long after its mark was chosen, as on a
    /// starved renewal path.
    pub starve: Duration,
}
