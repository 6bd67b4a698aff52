//! The end-to-end test binary: one binary, so pingora is linked once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;
mod support;

mod plan;
mod proxy_basics;
mod split;

mod admin_security;
mod alert_rules;
mod breakers;
mod capacity;
mod cli;
mod context_sweep;
mod control_isolation;
mod cost;
mod demo;
mod faults;
mod feedback;
mod fit;
mod fleet;
mod grafana;
mod grpc;
mod k8s;
mod kv_cache;
mod layout;
mod lifecycle;
mod limits;
mod lineage;
mod listener_limits;
pub(crate) mod llama_cpp;
mod load_full_link;
mod load_grpc;
mod load_labels;
mod load_replay;
mod load_report_to;
mod load_shards;
mod max_body;
mod mirror;
mod model_routing;
mod openai_sdk;
mod openapi;
mod otlp;
mod outlier;
mod prometheus;
mod prompt_size;
mod protocols;
mod recorder;
mod report_browser;
mod resp;
mod rollout;
mod shedding;
mod state;
mod tcp;
mod token_meter;
mod trace_cli;
