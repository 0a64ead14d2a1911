//! agent-lsp: a language server that runs a coding agent inside any LSP editor.
//!
//! See ARCHITECTURE.md for the layers and their invariants.

pub mod acp;
pub mod agent;
pub mod cli;
pub mod config;
pub mod editor;
pub mod facts;
pub mod frontmatter;
pub mod hash;
pub mod journal;
pub mod knowledge;
pub mod logging;
pub mod lsp;
pub mod markdown;
pub mod mcp;
pub mod memory;
pub mod paths;
pub mod permission;
pub mod provider;
pub mod repo_status;
pub mod secrets;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod store;
pub mod tokens;
pub mod tools;
pub mod workspace;
