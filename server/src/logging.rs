//! Logging through `tracing`: to stderr by default, or to a file. Never to stdout, which
//! belongs to the LSP channel (or to the CLI's own output).

use std::io::IsTerminal;
use std::path::Path;

use tracing_subscriber::EnvFilter;

/// Sets up the global subscriber. The level comes from `AGENT_LSP_LOG` (e.g. `debug`, or
/// `agent_lsp=trace`), else `default_level`.
pub fn init(log_file: Option<&Path>, default_level: &str) -> std::io::Result<()> {
    let filter = EnvFilter::try_from_env("AGENT_LSP_LOG")
        // rmcp logs each MCP session's whole handshake at info, and a server that cannot be
        // reached as an error of its worker; the MCP module reports failures itself, once.
        .unwrap_or_else(|_| EnvFilter::new(format!("{default_level},rmcp=off")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match log_file {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init(),
    }
    Ok(())
}
