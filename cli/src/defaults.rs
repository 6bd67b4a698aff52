//! The embedded default: the proxy on 127.0.0.1:8080 in front of a built-in
//! mock LLM, the control API on 127.0.0.1:9901. Also the thread that hosts
//! such a mock outside any caller's runtime.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context};
use tokio_util::sync::CancellationToken;

use crate::mock_llm::{MockKnobs, MockLlm, MockLlmOptions};

/// The default config, with the mock LLM listening on `mock`.
pub fn default_config_yaml(mock: SocketAddr) -> String {
    format!(
        r#"# sluice's embedded default: a proxy in front of a built-in mock LLM.
runtime: {{ threads: 2, grace_period: 10s }}
admin: {{ listen: 127.0.0.1:9901 }}
listeners:
  - {{ name: public, listen: 127.0.0.1:8080, protocol: http }}
clusters:
  - name: mock-llm
    kind: llm
    version: v1
    endpoints: ["{mock}"]
    timeouts: {{ connect: 1s, first_byte: 30s, idle: 60s }}
routes:
  - name: llm
    listener: public
    match: {{ path_prefix: / }}
    split: {{ mock-llm: 100 }}
    sticky: {{ header: x-session-id }}
"#
    )
}

/// A mock LLM on a thread and runtime of its own; stops when dropped.
pub struct MockThread {
    pub addr: SocketAddr,
    pub knobs: Arc<MockKnobs>,
    cancel: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl MockThread {
    pub fn start(options: MockLlmOptions) -> anyhow::Result<MockThread> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let cancel = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = cancel.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-mock-llm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match MockLlm::start(options).await {
                        Ok(mock) => {
                            let _ = tx.send(Ok((mock.addr(), mock.knobs())));
                            stop.cancelled().await;
                            mock.stop().await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
            })?;
        let (addr, knobs) = rx
            .recv()
            .map_err(|_| anyhow!("mock LLM thread ended early"))?
            .context("mock LLM")?;
        Ok(MockThread {
            addr,
            knobs,
            cancel,
            thread: Some(thread),
        })
    }
}

impl Drop for MockThread {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
