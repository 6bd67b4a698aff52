//! The latest KV-cache ratio of each scraped endpoint, for the data plane:
//! the scraper publishes a fresh table after each round (at most once a
//! second per endpoint), and a request reads it with one lock-free
//! `ArcSwap` load and two hash lookups. Never a lock, never a scrape on the
//! request path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

/// cluster → endpoint address → KV-cache usage (0..1).
type Table = HashMap<String, HashMap<SocketAddr, f64>>;

#[derive(Default)]
pub struct KvCacheReadings {
    table: ArcSwap<Table>,
}

impl KvCacheReadings {
    /// The last reading of `cluster`'s endpoint at `addr`; `None` when it is
    /// not scraped, its last scrape failed, or it serves no KV gauge.
    pub fn ratio(&self, cluster: &str, addr: SocketAddr) -> Option<f64> {
        self.table.load().get(cluster)?.get(&addr).copied()
    }

    /// Replaces the whole table (the scraper's, once a round).
    pub(super) fn publish(&self, table: Table) {
        self.table.store(Arc::new(table));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_published_table_is_read_by_cluster_and_address() {
        let readings = KvCacheReadings::default();
        let a: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:8001".parse().unwrap();
        assert_eq!(readings.ratio("llama", a), None);
        readings.publish(HashMap::from([(
            "llama".to_owned(),
            HashMap::from([(a, 0.25)]),
        )]));
        assert_eq!(readings.ratio("llama", a), Some(0.25));
        assert_eq!(readings.ratio("llama", b), None);
        assert_eq!(readings.ratio("vllm", a), None);
        readings.publish(HashMap::new());
        assert_eq!(readings.ratio("llama", a), None);
    }
}
