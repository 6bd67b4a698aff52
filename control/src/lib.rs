//! The sluice control plane: config, the live snapshot store, the control
//! API and the stats the API reports. Never imports the proxy or pingora.

mod config;

pub use config::{
    format_duration, parse_duration, AdminConfig, ClusterConfig, ClusterKind, Config, ConfigError,
    ConfigErrors, Endpoint, ListenerConfig, ListenerProtocol, RawConfig, RouteConfig,
    RuntimeConfig, StickyConfig, Timeouts, TokenSource, UpstreamTls,
};
