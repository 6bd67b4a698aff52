//! Toxics stacked on one side of a connection, on tokio's paused clock.

use super::*;

fn latency(ms: u64) -> Toxic {
    Toxic::Latency {
        latency: Duration::from_millis(ms),
        jitter: Duration::ZERO,
        direction: Direction::Upstream,
    }
}

/// A client stream wrapped with `guards` (first applied first), and the far
/// end the test writes into.
fn chained(guards: Vec<FaultGuard>) -> (Toxicated<DuplexStream>, DuplexStream) {
    let (near, far) = duplex(1 << 20);
    let (server_near, _server_far) = duplex(64);
    let (client, _server) = wrap(near, server_near, guards, None);
    (client, far)
}

/// Every read until EOF: its size and when it came.
async fn reads(client: &mut Toxicated<DuplexStream>) -> Vec<(usize, Duration)> {
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = client.read(&mut buf).await.unwrap();
        if n == 0 {
            return seen;
        }
        seen.push((n, started.elapsed()));
    }
}

#[tokio::test(start_paused = true)]
async fn two_latencies_add_up() {
    let (mut client, mut far) = chained(vec![guard(latency(30)), guard(latency(50))]);
    far.write_all(b"PING\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(client.read(&mut buf).await.unwrap(), 6);
    assert_eq!(started.elapsed(), Duration::from_millis(80));
}

#[tokio::test(start_paused = true)]
async fn latency_delays_each_chunk_from_its_arrival_so_delays_overlap() {
    let (mut client, mut far) = chained(vec![guard(latency(100))]);
    let reader = tokio::spawn(async move { reads(&mut client).await });
    far.write_all(b"first").await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    far.write_all(b"second").await.unwrap();
    drop(far);
    let seen = reader.await.unwrap();
    // Each chunk 100 ms after it came, not one hold after the other.
    assert_eq!(
        seen,
        vec![
            (5, Duration::from_millis(100)),
            (6, Duration::from_millis(110))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn latency_then_bandwidth_is_the_latency_plus_the_transfer() {
    let bandwidth = Toxic::Bandwidth {
        bytes_per_sec: 1000,
        direction: Direction::Upstream,
    };
    let (mut client, mut far) = chained(vec![guard(latency(100)), guard(bandwidth)]);
    far.write_all(&[3u8; 1000]).await.unwrap();
    drop(far);
    let seen = reads(&mut client).await;
    assert_eq!(seen.iter().map(|(n, _)| n).sum::<usize>(), 1000);
    // The first bytes wait for the latency; then 1000 bytes at 1000 B/s.
    assert_eq!(seen[0].1, Duration::from_millis(100));
    let (_, last) = seen[seen.len() - 1];
    assert!(
        last >= Duration::from_millis(1000) && last <= Duration::from_millis(1100),
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn slicer_then_latency_delays_every_piece_once() {
    let slicer = Toxic::Slicer {
        average_size: 4,
        size_variation: 0,
        delay: Duration::from_millis(10),
        direction: Direction::Upstream,
    };
    let (mut client, mut far) = chained(vec![guard(slicer), guard(latency(100))]);
    far.write_all(&[1u8; 20]).await.unwrap();
    drop(far);
    let seen = reads(&mut client).await;
    // Sliced at 0, 10, .. 40 ms, each piece 100 ms later: the latency once,
    // the slicer's delays on top.
    let expected: Vec<_> = (0..5)
        .map(|i| (4, Duration::from_millis(100 + 10 * i)))
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test(start_paused = true)]
async fn latency_then_limit_data_passes_the_limit_late_then_closes() {
    let limit = Toxic::LimitData {
        bytes: 10,
        direction: Direction::Upstream,
    };
    let (mut client, mut far) = chained(vec![guard(latency(50)), guard(limit)]);
    far.write_all(&[1u8; 100]).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    assert_eq!(client.read(&mut buf).await.unwrap(), 10);
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
}

#[tokio::test(start_paused = true)]
async fn limit_data_then_latency_closes_once_the_held_bytes_went() {
    let limit = Toxic::LimitData {
        bytes: 10,
        direction: Direction::Upstream,
    };
    let (mut client, mut far) = chained(vec![guard(limit), guard(latency(50))]);
    far.write_all(&[1u8; 100]).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    assert_eq!(client.read(&mut buf).await.unwrap(), 10);
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
}

#[tokio::test(start_paused = true)]
async fn latency_then_timeout_passes_nothing_and_closes_at_the_timeout() {
    let timeout = Toxic::Timeout {
        timeout: Duration::from_millis(300),
    };
    let (mut client, mut far) = chained(vec![guard(latency(50)), guard(timeout)]);
    far.write_all(b"GET k\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let err = client.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn an_expired_stage_leaves_the_chain_and_the_other_stays() {
    let lasting = guard(latency(30));
    let brief = guard_for(latency(50), Duration::from_millis(200));
    let (mut client, mut far) = chained(vec![lasting, brief]);
    let mut buf = [0u8; 16];
    far.write_all(b"one").await.unwrap();
    let started = Instant::now();
    assert_eq!(client.read(&mut buf).await.unwrap(), 3);
    assert_eq!(started.elapsed(), Duration::from_millis(80));
    tokio::time::sleep(Duration::from_millis(200)).await;
    far.write_all(b"two").await.unwrap();
    let started = Instant::now();
    assert_eq!(client.read(&mut buf).await.unwrap(), 3);
    assert_eq!(started.elapsed(), Duration::from_millis(30));
}

#[tokio::test(start_paused = true)]
async fn an_ended_latency_on_a_busy_stream_stops_holding_bytes_back() {
    let brief = guard_for(latency(100), Duration::from_millis(175));
    let (mut client, mut far) = chained(vec![brief]);
    let writer = tokio::spawn(async move {
        for _ in 0..=10 {
            far.write_all(b"tick").await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let seen = reads(&mut client).await;
    writer.await.unwrap();
    // A chunk every 50 ms, each read ahead while the one before waits: the
    // stage would never be empty. Ended, it stops reading ahead, hands on
    // what it holds and leaves: the last tick comes as it is written.
    assert_eq!(seen.iter().map(|(n, _)| n).sum::<usize>(), 44);
    assert_eq!(seen[0].1, Duration::from_millis(100));
    let (_, last) = seen[seen.len() - 1];
    assert_eq!(last, Duration::from_millis(500), "{seen:?}");
}
