#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;

const RPM_30: Limits = Limits {
    requests_per_minute: Some(30),
    input_tokens_per_minute: None,
    output_tokens_per_minute: None,
    total_tokens_per_minute: None,
    concurrent_streams: None,
};

fn one() -> Cost {
    Cost {
        input: 0,
        output: 0,
    }
}

fn allowed(d: Decision) -> bool {
    matches!(d, Decision::Allowed(_))
}

#[test]
fn a_first_share_is_paid_from_the_share_the_store_kept_for_it() {
    // 30 a minute over 3 sluices: 10 each before the store is asked.
    let mut key = FleetKey::new(&RPM_30, 3);
    for _ in 0..4 {
        assert!(allowed(key.admit(&RPM_30, one(), 100)));
    }
    let asks = key.asks(&RPM_30, 3);
    // 6 left; asked for 4 this interval, so it aims at 8: 2 more. The 10
    // it spent without a grant are its debt.
    assert_eq!(
        asks,
        vec![(
            LimitKind::Requests,
            30,
            LeaseAsk {
                held: 6.0,
                returned: 0.0,
                debt: 10.0,
                want: 2.0,
                least: 0.0,
            }
        )]
    );
    // The store made the bucket with 10 kept for each of the three: sluice
    // 0's pays its debt, the other two stay kept for them, so nothing is
    // left for its want yet.
    let mut bucket = FleetBucket::full(30, 3, 1_000, 0);
    let grant = bucket.sync(30, 0, &asks[0].2, 0);
    assert_eq!(
        grant,
        LeaseGrant {
            granted: 0.0,
            pool: 0.0
        }
    );
    // The pool, the leases and the kept shares hold what is left of the
    // 30: 4 were spent.
    assert_eq!(bucket.pool + bucket.leased(), 26.0);
    key.granted(&asks, &[grant]);
    assert_eq!(key.lease(LimitKind::Requests).unwrap().level(), 6.0);
    assert_eq!(key.headers(&RPM_30).requests, Some((30, 6, 48_000)));
    // The other two never met the key: past the peer time their shares go
    // back to the pool (with 2 s of refill), and sluice 0's want is granted.
    for _ in 0..4 {
        assert!(allowed(key.admit(&RPM_30, one(), 100)));
    }
    let asks = key.asks(&RPM_30, 3);
    assert_eq!((asks[0].2.held, asks[0].2.want), (2.0, 6.0));
    let grant = bucket.sync(30, 0, &asks[0].2, 2_000);
    assert_eq!(
        grant,
        LeaseGrant {
            granted: 6.0,
            pool: 15.0
        }
    );
}

#[test]
fn an_idle_lease_goes_back_to_the_pool_but_one_request() {
    let mut key = FleetKey::new(&RPM_30, 3);
    assert!(allowed(key.admit(&RPM_30, one(), 100)));
    let mut bucket = FleetBucket::full(30, 1, 1_000, 0);
    let asks = key.asks(&RPM_30, 3);
    key.granted(&asks, &[bucket.sync(30, 0, &asks[0].2, 0)]);
    // Asked for 1: aims at 2, holds 9: gives 7 back.
    assert_eq!(asks[0].2.returned, 7.0);
    assert_eq!(key.lease(LimitKind::Requests).unwrap().level(), 2.0);
    // An interval with nothing asked: keeps its largest cost, one request.
    let asks = key.asks(&RPM_30, 3);
    assert_eq!((asks[0].2.returned, asks[0].2.want), (1.0, 0.0));
    key.granted(&asks, &[bucket.sync(30, 0, &asks[0].2, 100)]);
    assert_eq!(key.lease(LimitKind::Requests).unwrap().level(), 1.0);
    assert_eq!(bucket.leased(), 1.0);
    // 1 spent, 1 held, and 100 ms of refill (0.05) capped at 30 - 1.
    assert_eq!(bucket.pool, 28.0 + 0.05);
}

#[test]
fn the_pool_never_refills_past_what_the_leases_leave() {
    let mut bucket = FleetBucket::full(30, 1, 1_000, 0);
    let ask = LeaseAsk {
        want: 20.0,
        ..LeaseAsk::default()
    };
    assert_eq!(bucket.sync(30, 0, &ask, 0).granted, 20.0);
    // A minute later the pool would hold 30 again, but 20 are leased.
    let nothing = LeaseAsk {
        held: 20.0,
        ..LeaseAsk::default()
    };
    assert_eq!(bucket.sync(30, 0, &nothing, WINDOW_MS).pool, 10.0);
    // Returned tokens beyond that room are gone: the bucket is full.
    let back = LeaseAsk {
        held: 5.0,
        returned: 15.0,
        ..LeaseAsk::default()
    };
    let g = bucket.sync(30, 0, &back, WINDOW_MS);
    assert_eq!((g.pool, bucket.leased()), (25.0, 5.0));
}

#[test]
fn answers_pay_their_extra_tokens_and_give_back_the_unused() {
    let limits = Limits {
        total_tokens_per_minute: Some(1_000),
        ..Limits::default()
    };
    let mut key = FleetKey::new(&limits, 2);
    let reserved = Cost {
        input: 10,
        output: 100,
    };
    assert!(allowed(key.admit(&limits, reserved, 100)));
    assert!(allowed(key.admit(&limits, reserved, 100)));
    // One answer used 30 of its 100, the other 250: 150 beyond.
    key.settle(
        &limits,
        reserved,
        Cost {
            input: 10,
            output: 30,
        },
    );
    key.settle(
        &limits,
        reserved,
        Cost {
            input: 10,
            output: 250,
        },
    );
    let lease = key.lease(LimitKind::TotalTokens).unwrap();
    // 500 - 110 - 110 - 150 = 130.
    assert_eq!(lease.level(), 130.0);
    let asks = key.asks(&limits, 2);
    // The unbacked 500 owed, the 70 unused returned to the pool.
    assert_eq!((asks[0].2.debt, asks[0].2.returned), (500.0, 70.0));
}

#[test]
fn a_short_lease_refuses_until_the_next_sync_or_the_fleet_refills() {
    let mut key = FleetKey::new(&RPM_30, 30);
    assert!(allowed(key.admit(&RPM_30, one(), 100)));
    // The lease is spent; the fleet had 29 left: the next sync brings one.
    match key.admit(&RPM_30, one(), 100) {
        Decision::Limited {
            kind,
            retry_after_ms,
            ..
        } => assert_eq!((kind, retry_after_ms), (LimitKind::Requests, 100)),
        other => panic!("{other:?}"),
    }
    // A fleet with nothing left: one request is 2 s of refill at 30 a minute.
    let asks = key.asks(&RPM_30, 30);
    key.granted(
        &asks,
        &[LeaseGrant {
            granted: 0.0,
            pool: 0.0,
        }],
    );
    match key.admit(&RPM_30, one(), 100) {
        Decision::Limited { retry_after_ms, .. } => assert_eq!(retry_after_ms, 2_100),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_sync_owes_its_debt_again() {
    let mut key = FleetKey::new(&RPM_30, 3);
    assert!(allowed(key.admit(&RPM_30, one(), 100)));
    let asks = key.asks(&RPM_30, 3);
    key.failed(&asks);
    let again = key.asks(&RPM_30, 3);
    assert_eq!(again[0].2.debt, 10.0);
    // The lease went down to one request meanwhile; after a fall it starts
    // over, still owing.
    assert_eq!(again[0].2.held, 1.0);
    key.failed(&again);
    key.forget();
    assert_eq!(key.lease(LimitKind::Requests).unwrap().level(), 0.0);
    assert_eq!(key.asks(&RPM_30, 3)[0].2.debt, 10.0);
}

/// Sluices sharing one budget through the store model, each sent a request
/// every `every_ms` (from `from_ms` on, when it first meets the key), each
/// syncing every `sync_ms` at its own phase with a round trip of `rtt_ms`
/// during which it keeps admitting. Returns how many were admitted in all.
struct Fleet {
    limit: u64,
    sync_ms: u64,
    rtt_ms: u64,
    sluices: Vec<Sluice>,
}

struct Sluice {
    every_ms: u64,
    from_ms: u64,
    phase_ms: u64,
    key: Option<FleetKey>,
    pending: Option<(u64, FleetAsks)>,
    admitted: u64,
}

impl Fleet {
    fn new(limit: u64, sync_ms: u64, rtt_ms: u64) -> Self {
        Fleet {
            limit,
            sync_ms,
            rtt_ms,
            sluices: Vec::new(),
        }
    }

    fn sluice(mut self, every_ms: u64, from_ms: u64, phase_ms: u64) -> Self {
        self.sluices.push(Sluice {
            every_ms,
            from_ms,
            phase_ms,
            key: None,
            pending: None,
            admitted: 0,
        });
        self
    }

    fn run(&mut self, until_ms: u64) -> u64 {
        let limits = Limits {
            requests_per_minute: Some(self.limit),
            ..Limits::default()
        };
        let peers = self.sluices.len() as u64;
        let mut bucket = FleetBucket::full(self.limit, peers as usize, peer_ms(self.sync_ms), 0);
        for now in 0..until_ms {
            for (n, s) in self.sluices.iter_mut().enumerate() {
                // The store's answer arrives.
                if let Some((at, asks)) = s.pending.take_if(|(at, _)| *at <= now) {
                    let grants: Vec<_> = asks
                        .iter()
                        .map(|(_, limit, ask)| bucket.sync(*limit, n, ask, at))
                        .collect();
                    if let Some(key) = &mut s.key {
                        key.granted(&asks, &grants);
                    }
                }
                if now >= s.from_ms && (now - s.from_ms) % s.every_ms == 0 {
                    let key = s.key.get_or_insert_with(|| FleetKey::new(&limits, peers));
                    if allowed(key.admit(&limits, one(), self.sync_ms)) {
                        s.admitted += 1;
                    }
                }
                if now % self.sync_ms == s.phase_ms && s.pending.is_none() {
                    if let Some(key) = &mut s.key {
                        s.pending = Some((now + self.rtt_ms, key.asks(&limits, peers)));
                    }
                }
            }
        }
        self.sluices.iter().map(|s| s.admitted).sum()
    }
}

#[test]
fn three_busy_sluices_admit_the_budget_and_its_refill_and_no_more() {
    // 60 a minute (1 a second) for 10 s: at most 60 + 10, whatever the
    // phases of their syncs; each is sent 100 a second.
    let mut fleet = Fleet::new(60, 100, 3)
        .sluice(10, 0, 0)
        .sluice(10, 3, 33)
        .sluice(10, 7, 66);
    let admitted = fleet.run(10_000);
    assert!(admitted <= 70, "{admitted}");
    // Short of it only by what the last interval left in the pool.
    assert!(admitted >= 68, "{admitted}");
}

#[test]
fn one_busy_sluice_gets_nearly_the_whole_budget_within_a_second() {
    // The others met the key once and sit idle, keeping one request each.
    let mut fleet = Fleet::new(300, 100, 2)
        .sluice(2, 0, 0)
        .sluice(100_000, 0, 33)
        .sluice(100_000, 0, 66);
    let admitted = fleet.run(1_000);
    // 300 + 5 of refill in all; the idle two hold 100 each at first and
    // give back all but one request's worth at their first sync.
    assert!(admitted <= 305, "{admitted}");
    let busy = fleet.sluices[0].admitted;
    assert!(busy >= 295, "{busy}");
}

#[test]
fn a_tenant_at_one_sluice_gets_the_others_shares_after_the_peer_time() {
    // The other two never meet the key: their shares (100 each) are kept
    // for the peer time (1 s at 100 ms syncs), then spent here.
    let mut fleet = Fleet::new(300, 100, 2)
        .sluice(2, 0, 0)
        .sluice(2, 100_000, 33)
        .sluice(2, 100_000, 66);
    let first = fleet.run(1_000);
    assert!((100..=105).contains(&first), "{first}");
    let mut fleet = Fleet::new(300, 100, 2)
        .sluice(2, 0, 0)
        .sluice(2, 100_000, 33)
        .sluice(2, 100_000, 66);
    let admitted = fleet.run(2_000);
    assert!((295..=310).contains(&admitted), "{admitted}");
}

#[test]
fn a_sluice_meeting_a_spent_key_overshoots_by_its_first_share_at_most() {
    // Two sluices spend the 30; a third meets the key at 5 s, when the
    // fleet has only its refill left: it spends its unbacked 10 first.
    let mut fleet = Fleet::new(30, 100, 2)
        .sluice(10, 0, 0)
        .sluice(10, 0, 50)
        .sluice(10, 5_000, 25);
    let admitted = fleet.run(6_000);
    // The bound: 30 + 3 of refill + 30 / 3.
    assert!(admitted <= 30 + 3 + 10, "{admitted}");
    assert!(
        admitted > 33,
        "the late sluice's share was spent: {admitted}"
    );
}

#[test]
fn the_pool_keeps_its_crumbs_for_a_sluice_that_can_use_them() {
    // 30 a minute: 1 s of refill is half a request.
    let mut bucket = FleetBucket::full(30, 1, 1_000, 0);
    let spend_all = LeaseAsk {
        debt: 30.0,
        ..LeaseAsk::default()
    };
    bucket.sync(30, 0, &spend_all, 0);
    let ask = LeaseAsk {
        want: 2.0,
        least: 1.0,
        ..LeaseAsk::default()
    };
    assert_eq!(bucket.sync(30, 0, &ask, 1_000).granted, 0.0);
    // Another second: one whole request, granted whole.
    let grant = bucket.sync(30, 0, &ask, 2_000);
    assert_eq!((grant.granted, grant.pool), (1.0, 0.0));
    // A lease that can already pay for a request takes any crumb.
    let mut key = FleetKey::new(&RPM_30, 3);
    assert!(allowed(key.admit(&RPM_30, one(), 100)));
    assert_eq!(key.asks(&RPM_30, 3)[0].2.least, 0.0);
}

#[test]
fn sluices_meeting_a_new_key_together_admit_the_budget_whatever_the_order_of_their_syncs() {
    // Sluice 0 syncs at once, then at 100 ms with a busy interval behind
    // it, before sluice 2 (which met the key 1 ms after it) first syncs:
    // sluice 2's first share must still be there to pay its debt.
    let mut fleet = Fleet::new(30, 100, 0)
        .sluice(10, 0, 0)
        .sluice(10, 0, 50)
        .sluice(10, 1, 0);
    let admitted = fleet.run(2_000);
    // 30 and 1 of refill.
    assert!(admitted <= 31, "{admitted}");
    assert!(admitted >= 30, "{admitted}");
}
