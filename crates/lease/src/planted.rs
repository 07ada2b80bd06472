//! Bugs planted on purpose, so the randomized fault campaign (`idcar-campaign`) can show
//! that its checker catches a broken fence. Only builds with the cargo feature
//! `fault-injection` act on one (`serve --plant-bug`, hidden, no environment variable); in
//! every other build the lease ignores the setting (`Protocol::planted` is always `None`).

/// Which deliberate bug, if any, the lease carries (both stores: the protocol is one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlantedBug {
    /// The correct protocol.
    #[default]
    None,
    /// A new holder ignores the mark its slot's last holder wrote: no wait past it, and a
    /// window that starts just below its own clock.
    SkipMarkWait,
    /// Renewals store a mark one horizon lower than the window they publish, so the mark
    /// in ZooKeeper no longer bounds what the holder issues.
    LowerMark,
    /// A release that does not know the highest tick issued (the owner's handle dropped: a
    /// panic that unwinds, a release abandoned at its timeout) writes the mark down to the
    /// claim's floor, below ticks that may have been issued.
    AbandonToFloor,
    /// A holder whose mark was lowered or deleted by someone else while its slot is still its
    /// own treats it as stolen and gives the slot back, instead of writing the mark back up:
    /// a waiter then claims above the lowered mark (marks keep no witness either, so nothing
    /// else floors it).
    NoWriteBack,
    /// Mark writes and claims are not conditional on the pool's identity, and a pool recorded
    /// anew does not wait past the marks already in it: instances with other parameters can
    /// run beside the old holders.
    IgnorePoolIdentity,
}

impl PlantedBug {
    /// Every bug with its flag name (`--plant-bug NAME`).
    pub const ALL: [(PlantedBug, &'static str); 6] = [
        (PlantedBug::None, "none"),
        (PlantedBug::SkipMarkWait, "skip-mark-wait"),
        (PlantedBug::LowerMark, "lower-mark"),
        (PlantedBug::AbandonToFloor, "abandon-to-floor"),
        (PlantedBug::NoWriteBack, "no-write-back"),
        (PlantedBug::IgnorePoolIdentity, "ignore-pool-identity"),
    ];

    /// The flag names, in order.
    pub fn names() -> [&'static str; 6] {
        Self::ALL.map(|(_, n)| n)
    }

    /// Its flag name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(b, _)| *b == self)
            .map_or("none", |(_, n)| n)
    }
}

impl std::str::FromStr for PlantedBug {
    type Err = String;

    fn from_str(s: &str) -> Result<PlantedBug, String> {
        Self::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(b, _)| *b)
            .ok_or_else(|| format!("no planted bug {s:?}: one of {}", Self::names().join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::PlantedBug;

    #[test]
    fn every_bug_reads_back_from_its_name() {
        for (bug, name) in PlantedBug::ALL {
            assert_eq!(bug.name(), name);
            assert_eq!(name.parse::<PlantedBug>(), Ok(bug));
        }
        assert!("meteor".parse::<PlantedBug>().is_err());
    }
}
