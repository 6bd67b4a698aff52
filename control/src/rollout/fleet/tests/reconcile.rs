//! Keeping the fleet at the rollout's weight: the split to write (pure),
//! the drift a reconcile round finds (pure), a DNS lookup that fails
//! keeping the last targets (pure), and a target moved by hand set back by
//! the real controller and counted in `sluice_fleet_drift_total`.

use super::*;
use crate::config::DnsTargets;

#[test]
fn only_a_split_without_the_weights_is_written_and_other_clusters_keep_theirs() {
    let current = split(90, 10);
    assert_eq!(push::split_to_write(&current, "stable", "canary", 10), None);
    assert_eq!(
        push::split_to_write(&current, "stable", "canary", 0),
        Some(split(100, 0))
    );
    // A target that lacks one of the clusters gets it.
    let partial = BTreeMap::from([("stable".to_string(), 100)]);
    assert_eq!(
        push::split_to_write(&partial, "stable", "canary", 25),
        Some(BTreeMap::from([
            ("stable".to_string(), 75),
            ("canary".to_string(), 25)
        ]))
    );
    // A weight over 100 is 100.
    assert_eq!(
        push::split_to_write(&current, "stable", "canary", 130),
        Some(split(0, 100))
    );
}

#[test]
fn a_reconcile_round_counts_the_settled_targets_it_had_to_write() {
    let urls: Vec<String> = ["http://a", "http://b", "http://c", "http://d"]
        .map(String::from)
        .to_vec();
    let mut t = Targets::new(&urls);
    t.want();
    let took = |u: &str| (u.to_string(), Ok(Applied::Written));
    t.record(10, Some(10), urls.iter().map(|u| took(u)).collect());
    assert_eq!(t.settled(), urls);

    // A new target appears and is pending: the round skips it.
    assert!(t.follow(&[urls.clone(), vec!["http://e".into()]].concat()));
    assert_eq!(t.settled(), urls);
    let round = t.reconciled(
        10,
        vec![
            ("http://a".into(), Ok(Applied::Unchanged)),
            ("http://b".into(), Ok(Applied::Written)),
            ("http://c".into(), Err("refused".into())),
            ("http://d".into(), Ok(Applied::Written)),
            ("http://e".into(), Ok(Applied::Written)),
        ],
    );
    assert_eq!(round.drifted, ["http://b", "http://d"]);
    assert_eq!(
        (round.failed, round.first_failures),
        (1, vec!["http://c: refused".to_string()])
    );
    let status = t.status();
    let drift: Vec<u64> = status.iter().map(|t| t.drift).collect();
    assert_eq!(drift, [0, 1, 0, 1, 0]);
    // The failed one keeps the weight it took; it is not pending again.
    assert_eq!((status[2].weight, status[2].pending), (Some(10), false));
    assert_eq!(status[2].error.as_deref(), Some("refused"));
    // The new one is still the push's: pending, without a weight.
    assert_eq!((status[4].weight, status[4].pending), (None, true));
    assert_eq!(t.due(), ["http://e"]);

    // Drifted again later: counted again.
    let round = t.reconciled(10, vec![("http://b".into(), Ok(Applied::Written))]);
    assert_eq!(round.drifted, ["http://b"]);
    assert_eq!(t.status()[1].drift, 2);
}

#[test]
fn a_failed_lookup_keeps_the_last_targets() {
    let dns = DnsTargets {
        name: "sluice-admin.test".into(),
        port: 9901,
        resolver: Some("127.0.0.1:5353".parse().unwrap()),
        refresh: Duration::from_secs(10),
    };
    let mut status = DiscoveryStatus::new(&dns);
    let mut targets = Targets::new(&[]);
    let first = vec![
        "http://10.0.0.1:9901".to_string(),
        "http://10.0.0.2:9901".into(),
    ];
    let follow = |targets: &mut Targets, r: Resolution| match r {
        Resolution::Found { urls, .. } => targets.follow(&urls),
        Resolution::Kept { .. } => false,
    };

    let r = status.record(Ok(first.clone()), 1_000);
    assert_eq!(
        r,
        Resolution::Found {
            urls: first.clone(),
            recovered: false
        }
    );
    assert!(follow(&mut targets, r));
    assert_eq!(targets.due(), first);

    // Two failures: the targets stay, the first is reported, both counted.
    let r = status.record(Err("`sluice-admin.test`: timed out".into()), 2_000);
    assert_eq!(
        r,
        Resolution::Kept {
            first: true,
            error: "`sluice-admin.test`: timed out".into()
        }
    );
    assert!(!follow(&mut targets, r));
    let r = status.record(
        Err("`sluice-admin.test`: no A or AAAA record".into()),
        3_000,
    );
    assert!(matches!(r, Resolution::Kept { first: false, .. }), "{r:?}");
    assert!(!follow(&mut targets, r));
    assert_eq!(targets.due(), first);
    assert_eq!(
        status,
        DiscoveryStatus {
            dns: "sluice-admin.test:9901".into(),
            resolver: Some("127.0.0.1:5353".into()),
            addresses: 2,
            resolved_ms: Some(1_000),
            failures: 2,
            error: Some("`sluice-admin.test`: no A or AAAA record".into()),
        }
    );

    // Back, with one pod gone and one new.
    let next = vec![
        "http://10.0.0.2:9901".to_string(),
        "http://10.0.0.3:9901".into(),
    ];
    let r = status.record(Ok(next.clone()), 4_000);
    assert_eq!(
        r,
        Resolution::Found {
            urls: next.clone(),
            recovered: true
        }
    );
    assert!(follow(&mut targets, r));
    assert_eq!(targets.due(), next);
    assert_eq!((status.failures, status.error.clone()), (0, None));
    assert_eq!(status.resolved_ms, Some(4_000));
}

#[tokio::test]
async fn an_address_resolves_to_itself_without_a_query() {
    // Nothing listens on the resolver: an IP address needs no lookup.
    let dns = DnsTargets {
        name: "127.0.0.7".into(),
        port: 9901,
        resolver: Some("127.0.0.1:9".parse().unwrap()),
        refresh: Duration::from_secs(10),
    };
    let found = Discovery::new(&dns).resolve().await;
    assert_eq!(found, Ok(vec!["http://127.0.0.7:9901".to_string()]));
}

/// A rollout on one target with a short reconcile interval: a split set
/// by hand behind the controller's back is set back within an interval or
/// two, counted once in the metric, in the target's status and in the
/// audit log.
#[tokio::test]
async fn a_target_moved_by_hand_is_set_back_and_counted() {
    std::env::set_var(TOKEN_ENV, TOKEN);
    let api = FakeApi::start(0).await;
    let yaml = format!(
        "{}rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, \
         steps: [10, 100], interval: 20ms, hold: 1h, gates: {{ ttft_p95: 1s }}, \
         targets: [{}], target_token_env: {TOKEN_ENV}, reconcile_interval: 100ms, \
         fanout: {{ concurrency: 1, timeout: 1s }} }}\n",
        stable_canary(),
        api.url()
    );
    let (store, shared) = testing::store(&yaml);
    let rollouts = Rollouts::new(
        store.clone(),
        shared.clone(),
        crate::observers::Observers::default(),
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn(rollouts.clone().run(cancel.clone()));
    wait_for_audit(
        &shared.events,
        "rollout chat-v2: weight 10 applied on all 1 target(s)",
    )
    .await;
    assert_eq!(api.split(), split(90, 10));
    let drift = || {
        let m = shared.metrics.encode();
        m.lines()
            .find(|l| l.starts_with(r#"sluice_fleet_drift_total{rollout="chat-v2"}"#))
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    // Exported at 0 before any drift, and nothing counted while in step.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(drift().as_deref(), Some("0"));
    let writes = api.writes();

    api.set_split(split(100, 0));
    wait_for_audit(
        &shared.events,
        &format!(
            "rollout chat-v2: 1 target(s) had drifted from weight 10, set back: {}",
            api.url()
        ),
    )
    .await;
    assert_eq!(api.split(), split(90, 10));
    assert_eq!(api.writes(), writes + 1);
    assert_eq!(drift().as_deref(), Some("1"));
    let status = rollouts.status("chat-v2").unwrap();
    assert_eq!(status.targets[0].drift, 1);
    assert_eq!(status.targets[0].weight, Some(10));
    // Nothing more to set back: the count stays.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(drift().as_deref(), Some("1"));
    assert_eq!(api.writes(), writes + 1);
    cancel.cancel();
    task.await.unwrap();
}
