//! `sluice demo`, the README's run command, as a user runs it: the real
//! binary, piped (so the line-per-change output), on ports of its own
//! choosing. It must tell the whole story and exit 0.

use crate::cli::sluice;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_rolls_back_at_step_3_then_promotes_the_retry() {
    let out = sluice(vec!["demo".into(), "--duration".into(), "40".into()]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{all}");
    let has = |what: &[&str]| stdout.lines().any(|l| what.iter().all(|w| l.contains(w)));

    // The rollback, as the controller recorded it, with its evidence.
    assert!(
        has(&[
            "chat-v2: progressing → rolled_back, step 3, weight 0:",
            "ttft_p95",
            "> 150ms"
        ]),
        "no rollback at step 3 on the TTFT gate\n{all}"
    );
    assert!(has(&["chat-v2 rolled_back step 3/5 weight 0"]), "{all}");
    // The retry walked to the end.
    assert!(
        has(&["chat-v2-retry: progressing → promoted, step 5, weight 100"]),
        "no promotion\n{all}"
    );
    assert!(
        has(&["chat-v2-retry promoted step 5/5 weight 100"]),
        "{all}"
    );
    // The summary says what happened and where to look.
    assert!(
        has(&[
            "1. chat-v2: canary slowed at step 3",
            "TTFT p95",
            "> 150 ms bound"
        ]),
        "{all}"
    );
    assert!(
        has(&["2. chat-v2-retry: healthy canary promoted to weight 100"]),
        "{all}"
    );
    assert!(
        has(&["metrics:     http://127.0.0.1:", "/metrics"]),
        "{all}"
    );
    assert!(
        has(&["control API: http://127.0.0.1:", "/v1/rollouts", "Bearer "]),
        "{all}"
    );
    // Piped output is plain lines: no cursor movement.
    assert!(
        !stdout.contains('\x1b'),
        "escape codes in piped output\n{all}"
    );
}
