//! Test support for agent-lsp: an LSP client that drives the real binary, and the `fake-llm`
//! model server.

pub mod cli_run;
pub mod context_eval;
pub mod fake_llm;
pub mod lsp_client;
pub mod memory;
pub mod model_smoke;
pub mod process;
pub mod task_eval;
