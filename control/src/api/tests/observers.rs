use super::*;

#[tokio::test]
async fn gpu_answers_unavailable_without_a_driver() {
    let s = Server::start_with(true).await;
    let gpu = s.api.observers.gpu.clone().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while gpu.snapshot()["polled_at_ms"].is_null() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no GPU poll in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The truth of this machine, asked of NVML directly.
    let has_gpu = nvml_wrapper::Nvml::init()
        .and_then(|n| n.device_count())
        .is_ok_and(|n| n > 0);

    let (status, body) = s.json(Method::GET, "/v1/gpu", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["available"], has_gpu, "{body}");
    assert!(body["polled_at_ms"].is_u64(), "{body}");
    if !has_gpu {
        assert_eq!(body["devices"], json!([]));
        let reason = body["reason"].as_str().unwrap();
        assert!(reason.starts_with("NVIDIA driver not found: "), "{reason}");
    }
    let (_, _, metrics) = s.call(Method::GET, "/metrics", None, "").await;
    let metrics = String::from_utf8_lossy(&metrics);
    let line = format!("sluice_gpu_available {}", u8::from(has_gpu));
    assert!(metrics.lines().any(|l| l == line), "{metrics}");

    let (status, _, _) = s.call(Method::GET, "/v1/gpu", None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, headers, _) = s.call(Method::POST, "/v1/gpu", Some(TOKEN), "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET");

    // No cluster of this config has a metrics_path.
    let (status, body) = s.json(Method::GET, "/v1/upstreams", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"clusters": []}));
    s.stop().await;
}

#[tokio::test]
async fn without_watchers_the_api_says_so() {
    let s = Server::start().await;
    let (status, body) = s.json(Method::GET, "/v1/gpu", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({
            "available": false,
            "reason": "GPU watcher not running",
            "devices": [],
            "polled_at_ms": null,
        })
    );
    let (status, body) = s.json(Method::GET, "/v1/upstreams", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"clusters": []}));
}
