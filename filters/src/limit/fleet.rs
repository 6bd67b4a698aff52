//! Fleet-wide budgets, the arithmetic only: a budget shared by the sluices
//! of a fleet through one store (Redis), spent locally from leases so that
//! admission never waits for the store.
//!
//! The store keeps, per budget and kind of limit, a [`FleetBucket`]: the
//! *pool* (tokens no sluice holds; it refills at the limit per minute) and
//! each sluice's *held* lease, as it last told it (a sluice that stopped
//! syncing is dropped from the count). The pool never refills past
//! `limit - leased` (the sum of the held leases), so the pool and the
//! leases together never hold more than the limit. Each sluice spends from its [`Lease`] and, every
//! sync interval, gives back what it holds beyond its target, pays its debts
//! (answers that cost more than reserved, its unbacked first share) and asks
//! for what it lacks. The store's script does the [`FleetBucket::sync`] step
//! atomically; this type is its model, for the tests and the docs.
//!
//! The one overshoot: a key a sluice has not seen yet starts with an
//! unbacked share (`limit / peers`) so that its first request is not refused
//! while the store is asked; it is paid at the next sync from the share the
//! store kept for it when the bucket was made (for the peer time), else from
//! the pool. So over any time `T` the fleet admits at most
//! `limit + limit × T / 60 s` plus the shares the pool could not pay: none
//! when the sluices met a new key within the peer time of each other, at
//! most `limit / peers` per sluice that first met the key later, once the
//! others had spent it.

use super::{Cost, Decision, LimitKind, Limits, RateHeaders, WINDOW_MS};

/// One sluice's hold on one fleet bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct Lease {
    /// Tokens (or requests) this sluice may still spend. Below zero when
    /// answers cost more than they reserved: a debt paid at the next sync.
    level: f64,
    /// Spent without a grant: the first share of a key not seen before.
    unbacked: f64,
    /// Reserved tokens answers did not use, given back to the pool.
    refunded: f64,
    /// Admitted and refused costs since the last sync: what is asked for.
    demand: f64,
    /// The largest single cost seen: an idle sluice keeps that much.
    largest: f64,
    /// The pool after the last sync: what the fleet had left.
    pool: f64,
}

/// What one sync sends the store for one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LeaseAsk {
    /// This sluice's lease now, what it gives back taken out: the store
    /// counts this as held here (what was spent leaves the count).
    pub held: f64,
    /// Given back to the pool.
    pub returned: f64,
    /// Taken from the pool for what was spent without a grant.
    pub debt: f64,
    /// Asked from the pool.
    pub want: f64,
    /// A grant smaller than this is no use: it would not pay for one more
    /// request (the largest seen). The pool keeps such crumbs for whoever
    /// can use them, so that its refill is not spread thin over the fleet.
    pub least: f64,
}

/// The store's answer to a [`LeaseAsk`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LeaseGrant {
    pub granted: f64,
    /// The pool once the grant is taken.
    pub pool: f64,
}

impl Lease {
    /// A sluice's first share of a key it has not seen: `limit / peers`,
    /// unbacked until the next sync pays it from the pool.
    pub fn first(limit: u64, peers: u64) -> Self {
        let share = limit as f64 / peers.max(1) as f64;
        Lease {
            level: share,
            unbacked: share,
            refunded: 0.0,
            demand: 0.0,
            largest: 0.0,
            pool: limit as f64 - share,
        }
    }

    /// Tokens (or requests) this sluice may still spend.
    pub fn level(&self) -> f64 {
        self.level
    }

    /// Whether `cost` may be spent now; a cost above the whole limit passes
    /// on a lease of the whole limit (else it never could) and leaves a debt.
    fn has(&self, cost: u64, limit: u64) -> bool {
        self.level >= cost.min(limit) as f64
    }

    fn note(&mut self, cost: u64) {
        self.demand += cost as f64;
        self.largest = self.largest.max(cost as f64);
    }

    /// The lease this sluice aims to hold after a sync: twice what it was
    /// asked for since the last one, at least one request's worth (capped at
    /// its fair share) so that an idle key's next request passes, at most the
    /// limit.
    pub fn target(&self, limit: u64, peers: u64) -> f64 {
        let limit = limit as f64;
        let floor = self.largest.min(limit / peers.max(1) as f64);
        (2.0 * self.demand).clamp(floor, limit)
    }

    /// The sync's request; the lease gives back what it holds beyond its
    /// target at once (those tokens are no longer spent here).
    pub fn ask(&mut self, limit: u64, peers: u64) -> LeaseAsk {
        let mut debt = std::mem::take(&mut self.unbacked);
        if self.level < 0.0 {
            debt -= self.level;
            self.level = 0.0;
        }
        let target = self.target(limit, peers);
        let excess = (self.level - target).max(0.0);
        self.level -= excess;
        let want = (target - self.level).max(0.0);
        let ask = LeaseAsk {
            held: self.level,
            returned: excess + std::mem::take(&mut self.refunded),
            debt,
            want,
            least: (self.largest.min(limit as f64) - self.level).clamp(0.0, want),
        };
        self.demand = 0.0;
        ask
    }

    /// The store answered: the grant is spent here from now on (what was
    /// spent while the sync was on its way comes out of it).
    pub fn granted(&mut self, grant: LeaseGrant) {
        self.level += grant.granted;
        self.pool = grant.pool;
    }

    /// The store did not answer: the debt is owed again at the next sync.
    /// What was given back is lost (the store may or may not have it), which
    /// can only leave the fleet short, never over.
    pub fn failed(&mut self, ask: &LeaseAsk) {
        self.unbacked += ask.debt;
    }

    /// After the store was unreachable this sluice may have been dropped
    /// from its count: it starts over with no lease (its debts still owed),
    /// rather than spend tokens the fleet no longer counts as held here.
    pub fn forget(&mut self) {
        self.level = self.level.min(0.0);
    }

    /// Whole tokens left in the fleet as this sluice last saw it.
    fn remaining(&self, limit: u64) -> u64 {
        (self.pool + self.level).clamp(0.0, limit as f64).floor() as u64
    }
}

/// How long a sluice counts as a peer without a sync, at `sync_ms`
/// between syncs; a new bucket keeps each peer's first share as long.
pub fn peer_ms(sync_ms: u64) -> u64 {
    (5 * sync_ms).max(1_000)
}

/// The store's state of one fleet bucket (see the module's doc), its
/// sluices numbered. The store's script also drops the lease of a sluice
/// that has not synced for a while (it is no longer counted a peer).
#[derive(Clone, Debug, PartialEq)]
pub struct FleetBucket {
    pub pool: f64,
    /// Each sluice's lease, as it last told it.
    pub held: Vec<f64>,
    /// Each peer's first share, kept out of the pool from the bucket's
    /// making until that peer syncs the key (its first share is paid from
    /// it) or `peer_ms` passes: the sluices that met a new key together
    /// spend its budget once, whatever the order of their syncs.
    pub kept: Vec<f64>,
    pub at_ms: u64,
    pub made_ms: u64,
    pub peer_ms: u64,
}

impl FleetBucket {
    /// A budget no sluice has touched, shared by `peers`: the limit split
    /// into their first shares.
    pub fn full(limit: u64, peers: usize, peer_ms: u64, now_ms: u64) -> Self {
        let share = limit as f64 / peers.max(1) as f64;
        FleetBucket {
            pool: limit as f64 - share * peers.max(1) as f64,
            held: Vec::new(),
            kept: vec![share; peers.max(1)],
            at_ms: now_ms,
            made_ms: now_ms,
            peer_ms,
        }
    }

    /// What the sluices hold, and what is kept for them, in all.
    pub fn leased(&self) -> f64 {
        self.held.iter().sum::<f64>() + self.kept.iter().sum::<f64>()
    }

    /// Sluice `sluice`'s sync: its kept first share (and every one kept
    /// past the peer time) back to the pool, its lease recounted, its
    /// returns and debts, the refill since the last sync (never past
    /// `limit - leased`), then the grant: at most what the pool has,
    /// nothing if that is less than `least`.
    pub fn sync(&mut self, limit: u64, sluice: usize, ask: &LeaseAsk, now_ms: u64) -> LeaseGrant {
        let limit = limit as f64;
        if self.held.len() <= sluice {
            self.held.resize(sluice + 1, 0.0);
        }
        let expired = now_ms.saturating_sub(self.made_ms) > self.peer_ms;
        for (i, kept) in self.kept.iter_mut().enumerate() {
            if i == sluice || expired {
                self.pool += std::mem::take(kept);
            }
        }
        self.held[sluice] = ask.held.max(0.0);
        self.pool += ask.returned - ask.debt;
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64;
        self.pool = (self.pool + limit * elapsed / WINDOW_MS as f64).min(limit - self.leased());
        self.at_ms = self.at_ms.max(now_ms);
        let granted = if self.pool >= ask.least {
            ask.want.min(self.pool.max(0.0))
        } else {
            0.0
        };
        self.pool -= granted;
        self.held[sluice] += granted;
        LeaseGrant {
            granted,
            pool: self.pool,
        }
    }
}

/// One key's leases, one per kind of limit (requests, input, output, total
/// tokens); those of kinds the route does not limit stay unused.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetKey {
    leases: [Lease; 4],
}

/// One key's asks of a sync: per configured limit, its kind, the limit and the ask.
pub type FleetAsks = Vec<(LimitKind, u64, LeaseAsk)>;

/// The kinds a fleet budget has, in the order of [`FleetKey`]'s leases.
pub const FLEET_KINDS: [LimitKind; 4] = [
    LimitKind::Requests,
    LimitKind::InputTokens,
    LimitKind::OutputTokens,
    LimitKind::TotalTokens,
];

fn limit_of(limits: &Limits, kind: LimitKind) -> Option<u64> {
    match kind {
        LimitKind::Requests => limits.requests_per_minute,
        LimitKind::InputTokens => limits.input_tokens_per_minute,
        LimitKind::OutputTokens => limits.output_tokens_per_minute,
        LimitKind::TotalTokens => limits.total_tokens_per_minute,
        LimitKind::ConcurrentStreams => limits.concurrent_streams,
    }
}

fn cost_of(cost: Cost, kind: LimitKind) -> u64 {
    match kind {
        LimitKind::Requests => 1,
        LimitKind::InputTokens => cost.input,
        LimitKind::OutputTokens => cost.output,
        LimitKind::TotalTokens => cost.total(),
        LimitKind::ConcurrentStreams => 0,
    }
}

impl FleetKey {
    /// First shares of a key this sluice has not seen, with `peers` sluices
    /// in the fleet.
    pub fn new(limits: &Limits, peers: u64) -> Self {
        FleetKey {
            leases: FLEET_KINDS
                .map(|k| Lease::first(limit_of(limits, k).unwrap_or(0), peers.max(1))),
        }
    }

    /// The lease of a kind of limit.
    pub fn lease(&self, kind: LimitKind) -> Option<&Lease> {
        FLEET_KINDS
            .iter()
            .position(|k| *k == kind)
            .map(|i| &self.leases[i])
    }

    fn configured<'a>(
        &'a mut self,
        limits: &'a Limits,
    ) -> impl Iterator<Item = (LimitKind, u64, &'a mut Lease)> + 'a {
        FLEET_KINDS
            .into_iter()
            .zip(self.leases.iter_mut())
            .filter_map(|(k, l)| Some((k, limit_of(limits, k)?, l)))
    }

    /// Admits a request reserving `reserved` from the leases: every limit's
    /// share is taken, or none. When one falls short, the request is refused
    /// until the next sync (`sync_ms` away) brings more, or longer when the
    /// fleet as last seen lacks it too. Stream slots are the caller's.
    pub fn admit(&mut self, limits: &Limits, reserved: Cost, sync_ms: u64) -> Decision {
        let mut refused: Option<(LimitKind, u64)> = None;
        for (kind, limit, lease) in self.configured(limits) {
            let cost = cost_of(reserved, kind);
            lease.note(cost);
            if !lease.has(cost, limit) {
                let short = cost.min(limit) as f64 - (lease.pool + lease.level).max(0.0);
                let refill = (short.max(0.0) * WINDOW_MS as f64 / limit as f64).ceil() as u64;
                let wait = sync_ms + refill;
                if refused.is_none_or(|(_, w)| wait > w) {
                    refused = Some((kind, wait));
                }
            }
        }
        if let Some((kind, retry_after_ms)) = refused {
            return Decision::Limited {
                kind,
                retry_after_ms,
                headers: self.headers(limits),
            };
        }
        for (kind, _, lease) in self.configured(limits) {
            lease.level -= cost_of(reserved, kind) as f64;
        }
        Decision::Allowed(self.headers(limits))
    }

    /// Ends an admitted request: what it cost beyond its reservation is
    /// taken from the lease (a debt if it runs out), what it did not use
    /// goes back to the pool at the next sync.
    pub fn settle(&mut self, limits: &Limits, reserved: Cost, actual: Cost) {
        for (kind, _, lease) in self.configured(limits) {
            if kind == LimitKind::Requests {
                continue;
            }
            let (reserved, actual) = (cost_of(reserved, kind), cost_of(actual, kind));
            if actual >= reserved {
                lease.level -= (actual - reserved) as f64;
            } else {
                lease.refunded += (reserved - actual) as f64;
            }
        }
    }

    /// This key's asks, one per configured limit, in [`FLEET_KINDS`] order.
    pub fn asks(&mut self, limits: &Limits, peers: u64) -> FleetAsks {
        self.configured(limits)
            .map(|(kind, limit, lease)| (kind, limit, lease.ask(limit, peers)))
            .collect()
    }

    /// The store's grants, in the order of [`FleetKey::asks`].
    pub fn granted(&mut self, asks: &[(LimitKind, u64, LeaseAsk)], grants: &[LeaseGrant]) {
        for ((kind, _, _), grant) in asks.iter().zip(grants) {
            if let Some(i) = FLEET_KINDS.iter().position(|k| k == kind) {
                self.leases[i].granted(*grant);
            }
        }
    }

    /// Every lease starts over (see [`Lease::forget`]).
    pub fn forget(&mut self) {
        self.leases.iter_mut().for_each(Lease::forget);
    }

    /// The store did not answer the asks.
    pub fn failed(&mut self, asks: &[(LimitKind, u64, LeaseAsk)]) {
        for (kind, _, ask) in asks {
            if let Some(i) = FLEET_KINDS.iter().position(|k| k == kind) {
                self.leases[i].failed(ask);
            }
        }
    }

    /// The `x-ratelimit-*` values as this sluice sees the fleet: what the
    /// pool had at the last sync plus this sluice's lease.
    pub fn headers(&self, limits: &Limits) -> RateHeaders {
        let of = |kind: LimitKind, limit: u64| {
            let lease = self.lease(kind)?;
            let remaining = lease.remaining(limit);
            let reset = ((limit - remaining) as f64 * WINDOW_MS as f64 / limit as f64).ceil();
            Some((limit, remaining, reset as u64))
        };
        let tokens = limits
            .total_tokens_per_minute
            .and_then(|l| of(LimitKind::TotalTokens, l))
            .or(limits
                .output_tokens_per_minute
                .and_then(|l| of(LimitKind::OutputTokens, l)))
            .or(limits
                .input_tokens_per_minute
                .and_then(|l| of(LimitKind::InputTokens, l)));
        RateHeaders {
            requests: limits
                .requests_per_minute
                .and_then(|l| of(LimitKind::Requests, l)),
            tokens,
        }
    }
}

#[cfg(test)]
mod tests;
