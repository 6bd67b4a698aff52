//! The process's tokio runtimes, watched for their live tasks:
//! `sluice_runtime_tasks{runtime}` is read from each runtime at scrape time,
//! so a task leak shows as a climbing gauge (the soak bench reads it).

use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts, Registry};
use tokio::runtime::Handle;

/// The runtimes watched, by name (`control`, `mirror`, `listener:NAME`).
pub struct Runtimes {
    handles: Mutex<Vec<(String, Handle)>>,
    tasks: IntGaugeVec,
}

impl Runtimes {
    pub(crate) fn new(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let tasks = IntGaugeVec::new(
            Opts::new(
                "sluice_runtime_tasks",
                "Tasks alive on each of the process's tokio runtimes (control, mirror, listener:NAME), read at scrape time.",
            ),
            &["runtime"],
        )?;
        let runtimes = Arc::new(Runtimes {
            handles: Mutex::new(Vec::new()),
            tasks,
        });
        registry.register(Box::new(Scrape(runtimes.clone())))?;
        Ok(runtimes)
    }

    /// Watches `handle` as `name`; a name already watched keeps its first.
    pub fn watch(&self, name: &str, handle: Handle) {
        let mut handles = self.handles.lock();
        if !handles.iter().any(|(n, _)| n == name) {
            handles.push((name.to_owned(), handle));
        }
    }

    /// Tasks alive on the runtime watched as `name`.
    pub fn tasks(&self, name: &str) -> Option<usize> {
        let handles = self.handles.lock();
        let (_, handle) = handles.iter().find(|(n, _)| n == name)?;
        Some(handle.metrics().num_alive_tasks())
    }
}

/// The registry's view: reads every runtime when scraped.
struct Scrape(Arc<Runtimes>);

impl Collector for Scrape {
    fn desc(&self) -> Vec<&Desc> {
        self.0.tasks.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        for (name, handle) in self.0.handles.lock().iter() {
            let alive = handle.metrics().num_alive_tasks();
            self.0
                .tasks
                .with_label_values(&[name.as_str()])
                .set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        self.0.tasks.collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_runtime_reports_its_live_tasks_at_scrape_time() {
        let registry = Registry::new();
        let runtimes = Runtimes::new(&registry).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtimes.watch("worker", runtime.handle().clone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            let _ = stopped.await;
            let _ = tx.send(());
        });
        let gauge = |registry: &Registry| {
            registry
                .gather()
                .iter()
                .find(|f| f.name() == "sluice_runtime_tasks")
                .map(|f| f.get_metric()[0].get_gauge().get_value())
        };
        assert_eq!(gauge(&registry), Some(1.0));
        assert_eq!(runtimes.tasks("worker"), Some(1));
        stop.send(()).unwrap();
        rx.recv().unwrap();
        // The task is gone once it has returned; the runtime drops it a
        // moment later (at most 5 s here).
        for _ in 0..1_000 {
            if runtimes.tasks("worker") == Some(0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(gauge(&registry), Some(0.0));
        assert_eq!(runtimes.tasks("unknown"), None);
    }
}
