//! The sluice control plane: config, the live snapshot store, the control
//! API and the stats the API reports. Never imports the proxy or pingora.

mod api;
mod config;
mod events;
mod gpu;
mod observers;
mod reload;
mod snapshot;
mod stats;
mod store;
mod upstream_metrics;

pub use api::{resolve_token, serve_admin, AdminApi, Readiness, MAX_BODY_BYTES};
pub use config::{
    format_duration, parse_duration, AccessLogConfig, AccessLogTarget, AdminConfig, ClusterConfig,
    ClusterKind, Config, ConfigError, ConfigErrors, Endpoint, GpuConfig, GpuMode, ListenerConfig,
    ListenerProtocol, RawConfig, RouteConfig, RuntimeConfig, StickyConfig, TelemetryConfig,
    Timeouts, TokenSource, UpstreamTls,
};
pub use events::{Event, EventLog};
pub use gpu::GpuWatcher;
pub use observers::Observers;
pub use reload::{reload_from_file, watch_config_file};
pub use snapshot::{ClusterRuntime, RouteRuntime, RouteTarget, Snapshot};
pub use stats::{Sample, Stats, StatsKey, StatsRow, TokenSample, WINDOW_SECONDS};
pub use store::SnapshotStore;
pub use upstream_metrics::{UpstreamLoad, UpstreamScraper};
