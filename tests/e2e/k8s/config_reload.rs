//! A ConfigMap volume as kubelet writes it (its atomic writer): the file is a
//! symlink `config.yaml -> ..data/config.yaml`, `..data` a symlink to a
//! timestamped directory, and an update writes a new directory, points
//! `..data_tmp` at it, renames that over `..data` (one atomic step) and removes
//! the old directory. A real `sluice run -c DIR/config.yaml` applies each update
//! from its poll, with no SIGHUP: it reads the path again, never a held inode.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::lifecycle::{answered_by, config, split_of, Running};
use crate::support::{free_port, NamedUpstream, TempDir, WAIT_POLL};

/// The config file is polled every second; this allows for a loaded machine.
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

/// A ConfigMap volume with one key, `config.yaml`, in kubelet's layout.
struct ConfigMapVolume {
    dir: PathBuf,
    /// The timestamped directory `..data` points at.
    current: Option<String>,
    updates: u32,
}

impl ConfigMapVolume {
    fn new(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            dir,
            current: None,
            updates: 0,
        }
    }

    /// What a pod mounts and sluice is given: the user-visible symlink.
    fn file(&self) -> PathBuf {
        self.dir.join("config.yaml")
    }

    /// Makes `text` the content of `config.yaml` the way kubelet does.
    fn publish(&mut self, text: &str) {
        self.updates += 1;
        let stamp = format!("..2026_12_06_15_00_{:02}.{:09}", self.updates, 1000);
        let data = self.dir.join(&stamp);
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("config.yaml"), text).unwrap();
        // Relative targets, as kubelet writes them.
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&stamp, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        if self.current.is_none() {
            std::os::unix::fs::symlink("..data/config.yaml", self.file()).unwrap();
        }
        if let Some(old) = self.current.replace(stamp) {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
        assert_eq!(std::fs::read_to_string(self.file()).unwrap(), text);
    }
}

/// Waits until route `chat`'s split is `split`, failing after [`RELOAD_WITHIN`].
async fn wait_for_split(sluice: &Running, split: Value) {
    let deadline = Instant::now() + RELOAD_WITHIN;
    while split_of(sluice).await != split {
        assert!(
            Instant::now() < deadline,
            "not reloaded to {split} within {RELOAD_WITHIN:?}:\n{}",
            sluice.output()
        );
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The applied config changes in the audit log, by their source.
async fn applied_sources(sluice: &Running) -> Vec<String> {
    let events = sluice.get("/v1/events").await;
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["result"] == "applied" && e["action"] == "reload config file")
        .map(|e| e["source"].as_str().unwrap().to_owned())
        .collect()
}

fn data_target(dir: &Path) -> PathBuf {
    std::fs::read_link(dir.join("..data")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_update_by_symlink_swap_is_applied_without_a_sighup() {
    let a = NamedUpstream::start("A").await.unwrap();
    let b = NamedUpstream::start("B").await.unwrap();
    let (port, admin) = (free_port(), free_port());
    let dir = TempDir::new("configmap-swap");
    let mut volume = ConfigMapVolume::new(dir.path().join("config"));
    volume.publish(&config(port, admin, a.addr(), b.addr(), (100, 0)));
    let first = data_target(&volume.dir);

    let mut sluice = Running::spawn_file(&dir, "sluice", &volume.file(), admin, &[]);
    sluice.ready().await;
    assert_eq!(split_of(&sluice).await, json!({"a": 100, "b": 0}));
    assert_eq!(answered_by(port, 3).await, vec!["A"; 3]);

    volume.publish(&config(port, admin, a.addr(), b.addr(), (0, 100)));
    assert_ne!(data_target(&volume.dir), first);
    assert!(!volume.dir.join(&first).exists(), "old directory kept");
    wait_for_split(&sluice, json!({"a": 0, "b": 100})).await;
    assert_eq!(answered_by(port, 3).await, vec!["B"; 3]);

    // A second swap, after the directory first read was removed: the watch
    // follows the path, not what it pointed at when sluice started.
    volume.publish(&config(port, admin, a.addr(), b.addr(), (100, 0)));
    wait_for_split(&sluice, json!({"a": 100, "b": 0})).await;
    assert_eq!(answered_by(port, 3).await, vec!["A"; 3]);

    // Both came from the file's poll; nothing sent a SIGHUP.
    assert_eq!(applied_sources(&sluice).await, ["file", "file"]);
}
