//! Following the leases: what each lease publishes, in the order of the generators, and why
//! none can issue now (see `install` for how each change reaches its generator).

use crate::generator::Window;
use crate::lease::LeaseState;
use tokio::sync::watch;

/// What each lease publishes, in the order of the generators.
#[derive(Debug)]
pub(super) struct Following {
    leases: Vec<watch::Receiver<LeaseState>>,
}

impl Following {
    pub(super) fn new(leases: Vec<watch::Receiver<LeaseState>>) -> Following {
        assert!(!leases.is_empty(), "a service needs a lease");
        Following { leases }
    }

    /// What each lease holds now, in order.
    pub(super) fn windows(&self) -> impl Iterator<Item = Option<Window>> + '_ {
        self.leases.iter().map(|l| l.borrow().window())
    }

    pub(super) fn len(&self) -> usize {
        self.leases.len()
    }

    /// Why the lease holds nothing now, in the lease's words (with `--slots`, every lease's).
    pub(super) fn reason(&self) -> String {
        let reason = |rx: &watch::Receiver<LeaseState>| rx.borrow().reason().map(str::to_string);
        match self.leases.as_slice() {
            [one] => reason(one).unwrap_or_else(|| "no lease".into()),
            all => {
                let mut why: Vec<String> = Vec::new();
                for r in all.iter().filter_map(reason) {
                    if !why.contains(&r) {
                        why.push(r);
                    }
                }
                format!("no slot is held (of {}): {}", all.len(), why.join("; "))
            }
        }
    }

    /// Lease `part`'s channel.
    pub(super) fn lease(&self, part: usize) -> watch::Receiver<LeaseState> {
        self.leases[part].clone()
    }
}
