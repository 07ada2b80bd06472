//! The hold loop of [`super::hold`]: one claim's window moved on, its mark written ahead (see
//! [`super::horizon`]), a foreign change of the mark, the claim or the pool looked at as soon as
//! the store says so, and every way a hold ends. The invariant it keeps is stated in
//! [`super`].

use super::conflict::{after_conflict, look_again, retry_wait, session_gone, starve};
use super::horizon::{Demand, Horizons, Reach};
use super::{
    interrupted, lapse, or_lapse, publish, recovered, stored_mark, Claim, MarkStore, Outcome,
    Protocol, StoreError,
};
use crate::issuance::Left;
use crate::pace::Pace;
use crate::stop::{Interrupted, Stop};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// What woke a holder.
enum Woke {
    /// The pass it was waiting for.
    Due,
    /// Someone started or stopped waiting for a slot.
    Demand,
    /// Someone else may have written the slot's mark (or taken the claim, or replaced the
    /// pool).
    Foreign,
}

/// A watch of the store (see [`MarkStore::changed`]).
type Watch = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One claim being held.
pub(super) struct Holder<'a, S: MarkStore> {
    p: &'a Protocol,
    store: &'a S,
    claim: Claim<S::Version>,
    generation: &'a mut u64,
    h: Horizons,
    pace: Pace,
    /// A window was published (after the first write).
    published: bool,
    /// The window ran out unrenewed (counted as an `unreachable` loss, once).
    lapsed: bool,
    /// Marks written with no reply (the write may have been applied): our own if seen.
    unconfirmed: Vec<u64>,
    /// The next pass writes the mark whatever the horizon says (a write-back).
    force: bool,
    /// What our last confirmed write put in the store (the mark, but for a planted bug).
    in_store: u64,
    /// A watch of the mark, the claim and the pool at the version we last wrote.
    foreign: Option<(S::Version, Watch)>,
    /// How far the mark last written reaches, as logged.
    reach: Option<Reach>,
}

impl<'a, S: MarkStore> Holder<'a, S> {
    pub(super) fn new(
        p: &'a Protocol,
        store: &'a S,
        claim: Claim<S::Version>,
        generation: &'a mut u64,
    ) -> Self {
        Holder {
            p,
            store,
            h: Horizons::new(
                p.scheme.ticks_in(p.timing.horizon),
                p.scheme.ticks_in(p.timing.idle_horizon),
            ),
            pace: Pace::new(p.timing),
            published: false,
            lapsed: false,
            unconfirmed: Vec::new(),
            force: false,
            in_store: claim.mark,
            foreign: None,
            reach: None,
            claim,
            generation,
        }
    }

    fn holding(&self) -> bool {
        self.published && !self.lapsed
    }

    /// Passes until the hold ends: each waits for its time (or the store's word), moves the
    /// window on, and writes the mark when the horizon says so. A hold that published a window
    /// leaves what a claim back needs ([`super::again`]) however it ended — its session gone, or
    /// its slot's node with it (a claim back needs the mark still its own write, which a
    /// foreign write never is).
    pub(super) async fn run(mut self, stop: &mut Stop, demand: &mut Demand) -> Outcome {
        let end = self.passes(stop, demand).await;
        if self.published {
            self.p.leave(self.left());
        }
        end
    }

    /// What this hold leaves behind for a claim back.
    fn left(&self) -> Left {
        let mut marks = self.unconfirmed.clone();
        marks.push(self.in_store);
        Left {
            slot: self.claim.slot,
            token: self.claim.token,
            marks,
            floor: self.claim.floor,
            window: self.claim.window,
            generation: *self.generation,
        }
    }

    async fn passes(&mut self, stop: &mut Stop, demand: &mut Demand) -> Outcome {
        let mut next = Duration::ZERO;
        loop {
            let planned = Instant::now() + next;
            let woke = match self.wake(stop, demand, next).await {
                Ok(w) => w,
                Err(i) => {
                    let (p, store, holding) = (self.p, self.store, self.holding());
                    return interrupted(p, store, &self.claim, i, holding, &self.unconfirmed).await;
                }
            };
            let due = planned.min(Instant::now());
            if let Woke::Foreign = woke {
                match self.look_again().await {
                    // Nothing changed that needs a write: the pass keeps its time.
                    Ok(None) if !self.force => {
                        next = planned.saturating_duration_since(Instant::now());
                        continue;
                    }
                    Ok(None) => {}
                    Ok(Some(wait)) => {
                        (self.force, next) = (true, wait);
                        continue;
                    }
                    Err(end) => return end,
                }
            }
            next = match self.pass(due, demand.reach()).await {
                Ok(next) => next,
                Err(end) => return end,
            };
        }
    }

    /// Waits `next`, or for the store's word (someone waits, or the mark changed).
    async fn wake(
        &mut self,
        stop: &mut Stop,
        demand: &mut Demand,
        next: Duration,
    ) -> Result<Woke, Interrupted> {
        let claim = &self.claim;
        // Not while a write is due anyway (a write-back): a missing mark would fire at once.
        if self.force {
            self.foreign = None;
        } else if self.published
            && self
                .foreign
                .as_ref()
                .is_none_or(|(v, _)| *v != claim.version)
        {
            let watch = self.store.changed(claim.slot, claim.version);
            self.foreign = Some((claim.version, Box::pin(watch)));
        }
        let watch = async {
            match &mut self.foreign {
                Some((_, f)) => f.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stop.sleep(next) => r.map(|()| Woke::Due),
            () = demand.changed() => Ok(Woke::Demand),
            () = watch => Ok(Woke::Foreign),
        }
    }

    /// The watch fired: our own write whose reply was lost, or someone else's change — looked
    /// at again. `None`: carry on; a wait before the write-back; or how the hold ends.
    async fn look_again(&mut self) -> Result<Option<Duration>, Outcome> {
        self.foreign = None;
        if !self.unconfirmed.is_empty() {
            // The change may be our own write whose reply was lost. Unreadable, a moved mark
            // proves nothing: looked at again soon (the write that follows tells).
            match self.found_own_write().await {
                Ok(found) => self.force |= found,
                Err(e @ (StoreError::SessionGone(_) | StoreError::Refused(_))) => {
                    return Err(session_gone(&e, "reading our mark", self.holding()));
                }
                Err(_) => return Ok(Some(retry_wait(self.p))),
            }
        }
        let holding = self.holding();
        let (p, store) = (self.p, self.store);
        look_again(
            p,
            store,
            &mut self.claim,
            self.in_store,
            holding,
            &mut self.lapsed,
        )
        .await
    }

    /// One pass at `due` (when it was planned, or woken): the window moved on within the mark,
    /// the mark written if the horizons say so. The wait before the next pass.
    async fn pass(&mut self, due: Instant, reach: Reach) -> Result<Duration, Outcome> {
        let p = self.p;
        let now = p.now_tick();
        let window = self.h.window(self.claim.window, now);
        // The window moves first, within the mark stored and every write still unanswered.
        let ceiling = self
            .unconfirmed
            .iter()
            .copied()
            .fold(self.claim.mark, u64::min);
        if self.published && window.min(ceiling) > self.claim.window {
            if !self.lapsed {
                self.pace
                    .record(&p.metrics, p.wait_past(self.claim.window), due.elapsed());
            }
            self.claim.window = window.min(ceiling);
            publish(
                p,
                &self.claim,
                &mut self.published,
                &mut self.lapsed,
                self.generation,
            );
        }
        // A write left unanswered is tried again at once (a lowering one caps the window).
        let must = self.force || !self.published || !self.unconfirmed.is_empty();
        let Some(want) = self.h.to_write(self.claim.mark, window, now, must, reach) else {
            return Ok(self
                .pace
                .next(due.elapsed(), p.wait_past(self.claim.window)));
        };
        self.write(due, window, want, reach).await
    }

    /// Writes `want` (never below `window`): the wait before the next pass, or how the hold
    /// ends.
    async fn write(
        &mut self,
        due: Instant,
        window: u64,
        mut want: u64,
        reach: Reach,
    ) -> Result<Duration, Outcome> {
        let (p, store) = (self.p, self.store);
        let t = Instant::now();
        let mut stored = stored_mark(p, want, self.h.short);
        starve(p).await;
        let runs_out = self.holding().then(|| p.wait_past(self.claim.window));
        let mut written = or_lapse(store.write(&self.claim, stored), runs_out, || {
            lapse(p, store, &self.claim, &mut self.lapsed)
        })
        .await;
        if matches!(written, Err(StoreError::Conflict(_))) && !self.unconfirmed.is_empty() {
            // An earlier write whose reply was lost may have gone through: if it carries this
            // claim's token, carry on from there (never below the window). Unreadable, the
            // conflict proves nothing: the write is treated as unanswered.
            match self.found_own_write().await {
                Ok(true) => {
                    let now = p.now_tick();
                    want = self
                        .h
                        .to_write(self.claim.mark, window, now, true, reach)
                        .unwrap_or(window);
                    stored = stored_mark(p, want, self.h.short);
                    written = store.write(&self.claim, stored).await;
                }
                Ok(false) => {}
                Err(e) => written = Err(e),
            }
        }
        let holding = self.holding();
        match written {
            Ok(version) => {
                let m = &p.metrics;
                m.renewal_seconds.observe(t.elapsed().as_secs_f64());
                m.renewals.with_label_values(&["ok"]).inc();
                let took = due.elapsed();
                let claim = &mut self.claim;
                if holding && p.now_tick() > claim.window {
                    // The write outlived the window without `or_lapse` seeing it (a store
                    // that completes on its first poll, such as the state file).
                    lapse(p, store, claim, &mut self.lapsed);
                }
                if holding && !self.lapsed && claim.window < window {
                    self.pace
                        .record(&p.metrics, p.wait_past(claim.window), took);
                }
                (claim.mark, claim.version) = (want, version);
                (self.force, self.in_store) = (false, stored);
                claim.window = claim.window.max(window.min(want));
                self.h.draw();
                publish(
                    p,
                    claim,
                    &mut self.published,
                    &mut self.lapsed,
                    self.generation,
                );
                self.unconfirmed.clear();
                let next = self.pace.next(took, p.wait_past(self.claim.window));
                self.say_reach(if want > window { reach } else { Reach::Short });
                Ok(next)
            }
            Err(e @ (StoreError::SessionGone(_) | StoreError::Refused(_))) => {
                // It may have landed all the same: a claim back must recognise it.
                self.unconfirmed.push(stored);
                Err(session_gone(&e, "renewing", holding))
            }
            Err(StoreError::Conflict(e)) => {
                let found = store.recheck(&self.claim).await;
                let lapsed = &mut self.lapsed;
                let wait = after_conflict(p, store, &mut self.claim, found, &e, holding, lapsed);
                let wait = wait.await?;
                self.force = true;
                Ok(wait)
            }
            Err(StoreError::Unavailable(e)) => {
                // Unreachable or slow: the mark already written stays in force. The write
                // may still have been applied.
                self.unconfirmed.push(stored);
                p.metrics.renewals.with_label_values(&["error"]).inc();
                tracing::warn!(
                    error = %e,
                    mark = self.claim.mark,
                    attempted = want,
                    "could not renew the time mark"
                );
                if holding && p.now_tick() > self.claim.window {
                    lapse(p, store, &self.claim, &mut self.lapsed);
                }
                Ok(retry_wait(p))
            }
        }
    }
}

impl<S: MarkStore> Holder<'_, S> {
    /// Whether one of the writes left unanswered went through (the claim then carries on from
    /// it); an error if the store could not say.
    async fn found_own_write(&mut self) -> Result<bool, StoreError> {
        let Some((version, value)) = self.store.own_write(&self.claim, &self.unconfirmed).await?
        else {
            return Ok(false);
        };
        tracing::info!(mark = value, "an earlier mark write had gone through");
        self.claim = recovered(&self.claim, version, value);
        self.in_store = value;
        self.unconfirmed.clear();
        Ok(true)
    }

    /// Says (once per change, as a lease record the fault campaign reads) how far the mark just
    /// written reaches: the idle horizon (no one waits, room to spare), twice the short one (a
    /// full pool) or down at the window (a contender waits).
    fn say_reach(&mut self, reach: Reach) {
        if self.reach.replace(reach) == Some(reach) {
            return;
        }
        let (slot, mark, generation) = (self.claim.slot, self.claim.mark, *self.generation);
        let why = match reach {
            Reach::Idle => "the time mark reaches the idle horizon: no one waits for a slot",
            Reach::Full => {
                "the time mark reaches twice the horizon: every slot of the pool is held, so a \
                 crash would leave the next claimant waiting"
            }
            Reach::Short => "the time mark is at the horizon: a contender waits for a slot",
        };
        tracing::info!(
            lease_record = "mark",
            reach = reach.name(),
            slot,
            mark,
            generation,
            "{why}"
        );
    }
}
