// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::*;

/// A data plane whose in-flight count the test sets, recording what it was
/// told.
#[derive(Default)]
struct FakeDataPlane {
    inflight: AtomicUsize,
    draining: AtomicBool,
    stopped: Mutex<Vec<Stop>>,
    /// What `hand_over` answers; `None` fails.
    hand_over: Mutex<Option<usize>>,
}

impl DataPlane for FakeDataPlane {
    fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    fn stop(&self, how: Stop) {
        self.stopped.lock().unwrap().push(how);
    }

    fn hand_over(&self) -> Result<usize, HandOverError> {
        let answer = *self.hand_over.lock().unwrap();
        answer.ok_or_else(|| HandOverError("nobody waiting".into()))
    }
}

struct Running {
    data_plane: Arc<FakeDataPlane>,
    readiness: Arc<Readiness>,
    requests: watch::Sender<Option<Stop>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

const GRACE: Duration = Duration::from_secs(10);

fn start(inflight: usize) -> Running {
    let data_plane = Arc::new(FakeDataPlane::default());
    data_plane.inflight.store(inflight, Ordering::SeqCst);
    let readiness = Arc::new(Readiness::new());
    readiness.set_ready(true);
    let (requests, rx) = watch::channel(None);
    let cancel = CancellationToken::new();
    let stopper = Stopper {
        data_plane: data_plane.clone(),
        readiness: readiness.clone(),
        grace: GRACE,
        signals: false,
        admin_accept: CancellationToken::new(),
    };
    let task = tokio::spawn(stopper.run(rx, cancel.clone()));
    Running {
        data_plane,
        readiness,
        requests,
        cancel,
        task,
    }
}

impl Running {
    fn stopped(&self) -> Vec<Stop> {
        self.data_plane.stopped.lock().unwrap().clone()
    }
}

#[tokio::test(start_paused = true)]
async fn a_drain_goes_unready_first_and_stops_once_idle() {
    let mut r = start(2);
    r.requests.send_replace(Some(Stop::Drain));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(r.readiness.is_draining());
    assert!(!r.readiness.is_ready());
    assert!(r.data_plane.draining.load(Ordering::SeqCst));
    assert!(r.stopped().is_empty(), "stopped with requests in flight");

    r.data_plane.inflight.store(0, Ordering::SeqCst);
    (&mut r.task).await.unwrap();
    assert_eq!(r.stopped(), [Stop::Drain]);
}

#[tokio::test(start_paused = true)]
async fn a_drain_ends_at_the_grace_period() {
    let mut r = start(1);
    let began = tokio::time::Instant::now();
    r.requests.send_replace(Some(Stop::Drain));
    (&mut r.task).await.unwrap();
    let took = began.elapsed();
    assert!(
        took >= GRACE && took < GRACE + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(r.stopped(), [Stop::Drain]);
}

#[tokio::test(start_paused = true)]
async fn a_fast_request_cuts_a_drain_short() {
    let mut r = start(1);
    r.requests.send_replace(Some(Stop::Drain));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(r.stopped().is_empty());
    r.requests.send_replace(Some(Stop::Fast));
    (&mut r.task).await.unwrap();
    assert_eq!(r.stopped(), [Stop::Fast]);
}

#[tokio::test(start_paused = true)]
async fn a_fast_stop_does_not_drain() {
    let mut r = start(3);
    r.requests.send_replace(Some(Stop::Fast));
    (&mut r.task).await.unwrap();
    assert_eq!(r.stopped(), [Stop::Fast]);
    assert!(!r.data_plane.draining.load(Ordering::SeqCst));
    assert!(!r.readiness.is_ready());
}

#[tokio::test(start_paused = true)]
async fn cancel_ends_the_task_without_stopping_anything() {
    let mut r = start(0);
    r.cancel.cancel();
    (&mut r.task).await.unwrap();
    assert!(r.stopped().is_empty());
    assert!(r.readiness.is_ready());
}

#[tokio::test]
async fn a_hand_over_stops_the_admin_api_accepting_and_a_failed_one_leaves_it() {
    let data_plane = Arc::new(FakeDataPlane::default());
    let stopper = Stopper {
        data_plane: data_plane.clone(),
        readiness: Arc::new(Readiness::new()),
        grace: GRACE,
        signals: false,
        admin_accept: CancellationToken::new(),
    };
    assert!(!stopper.hand_over().await);
    assert!(!stopper.admin_accept.is_cancelled());
    assert!(data_plane.stopped.lock().unwrap().is_empty());

    *data_plane.hand_over.lock().unwrap() = Some(3);
    assert!(stopper.hand_over().await);
    assert!(stopper.admin_accept.is_cancelled());
}
