//! The `sluice` command line's parts, as a library so that the end-to-end
//! tests and benches drive the same code as the binary: the control API
//! client (`ctl`), the demo, the mock LLM and the embedded default config.

pub mod ctl;
mod defaults;
mod demo;
mod mock_llm;

pub use defaults::{default_config_yaml, MockThread};
pub use demo::{run_demo, DemoOptions};
pub use mock_llm::{MockKnobs, MockLlm, MockLlmOptions, SeenRequest, Stall};
