//! The copy of a pool a follower ([`super::view`]) keeps: the objects of one list, then each
//! change of the watch applied in order (one the copy already has is skipped).

use super::api::Event;
use super::objects::{self, Names};
use super::view::Objects;
use k8s_openapi::api::coordination::v1::Lease;
use std::sync::Arc;

/// The copy being kept.
#[derive(Default)]
pub(super) struct Copy {
    /// The pool's objects by role.
    pub objects: Objects,
    /// The highest `resourceVersion` applied.
    pub version: u64,
}

impl Copy {
    pub fn listed(names: &Names, items: Vec<Lease>, version: &str) -> Copy {
        let mut copy = Copy::default();
        for l in items {
            copy.put(names, Arc::new(l));
        }
        copy.version = version.parse().unwrap_or(0);
        copy
    }

    fn put(&mut self, names: &Names, l: Arc<Lease>) {
        let o = &mut self.objects;
        match objects::role(&l) {
            Some("session") => {
                o.sessions.insert(Arc::from(objects::name(&l)), l);
            }
            Some("slot") => {
                if let Some(n) = names.slot_of(objects::name(&l)) {
                    o.slots.insert(n, l);
                }
            }
            Some("params") if objects::name(&l) == names.params() => o.params = Some(l),
            _ => {}
        }
    }

    fn remove(&mut self, names: &Names, l: &Lease) {
        let o = &mut self.objects;
        let name = objects::name(l);
        if let Some(n) = names.slot_of(name) {
            o.slots.remove(&n);
        } else if name == names.params() {
            o.params = None;
        } else {
            o.sessions.remove(name);
        }
    }

    /// Whether `other` holds other objects, or other versions of them.
    pub fn differs(&self, other: &Copy) -> bool {
        fn same<'a>(
            a: impl ExactSizeIterator<Item = &'a Arc<Lease>>,
            b: impl ExactSizeIterator<Item = &'a Arc<Lease>>,
        ) -> bool {
            a.len() == b.len()
                && a.zip(b).all(|(x, y)| {
                    objects::name(x) == objects::name(y)
                        && objects::version(x) == objects::version(y)
                })
        }
        let (a, b) = (&self.objects, &other.objects);
        !(same(a.slots.values(), b.slots.values())
            && same(a.sessions.values(), b.sessions.values())
            && same(a.params.iter(), b.params.iter()))
    }

    /// Applies one change (one the copy already has — the pool listed after it — is skipped:
    /// changes come in order).
    pub fn apply(&mut self, names: &Names, e: Event) {
        let (Event::Put(l) | Event::Gone(l)) = &e;
        let v = objects::version_number(l).unwrap_or(0);
        if v <= self.version {
            return;
        }
        self.version = v;
        match e {
            Event::Put(l) => self.put(names, Arc::new(l)),
            Event::Gone(l) => self.remove(names, &l),
        }
    }
}
