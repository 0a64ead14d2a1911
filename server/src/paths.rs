//! Where agent-lsp keeps its files: XDG base directories, overridable for tests.

use std::path::PathBuf;

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn non_empty_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$AGENT_LSP_DATA_DIR`, else `$XDG_DATA_HOME/agent-lsp`, else `~/.local/share/agent-lsp`.
pub fn data_dir() -> PathBuf {
    non_empty_env("AGENT_LSP_DATA_DIR").unwrap_or_else(|| {
        non_empty_env("XDG_DATA_HOME")
            .unwrap_or_else(|| home().join(".local/share"))
            .join("agent-lsp")
    })
}

/// `$XDG_CONFIG_HOME/agent-lsp`, else `~/.config/agent-lsp`.
pub fn config_dir() -> PathBuf {
    non_empty_env("XDG_CONFIG_HOME")
        .unwrap_or_else(|| home().join(".config"))
        .join("agent-lsp")
}

/// The SQLite database shared by every server process of this user.
pub fn database_path() -> PathBuf {
    data_dir().join("agent-lsp.db")
}

/// The user's config file.
pub fn user_config_file() -> PathBuf {
    config_dir().join("config.toml")
}

/// The name of a workspace's own config file, at its root.
pub const WORKSPACE_CONFIG_FILE: &str = ".agent-lsp.toml";
