//! The editor surface: LSP over stdio.

pub mod bridge;
pub mod documents;
mod host;
pub mod protocol;
mod server;
pub mod transport;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tower_lsp_server::{LspService, Server};

pub use server::Backend;

/// Serves LSP on `input`/`output` until `exit` (or end of input). Returns the process exit
/// code the spec asks for: 0 if `shutdown` came first, 1 otherwise.
pub async fn serve<R, W>(input: R, output: W) -> i32
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let shutdown_requested = Arc::new(AtomicBool::new(false));
    let flag = shutdown_requested.clone();
    let (service, socket) = LspService::build(move |client| Backend::new(client, flag))
        .custom_method("agent/documentText", Backend::document_text)
        .custom_method("agent/config", Backend::config)
        .custom_method("agent/prompt", Backend::prompt)
        .custom_method("agent/cancel", Backend::cancel)
        .custom_method("agent/sessions", Backend::sessions)
        .custom_method("agent/history", Backend::history)
        .custom_method("agent/revert", Backend::revert)
        .custom_method("agent/unrevert", Backend::unrevert)
        .custom_method("agent/undo", Backend::undo)
        .custom_method("agent/redo", Backend::unrevert)
        .custom_method("agent/setMode", Backend::set_mode)
        .custom_method("agent/search", Backend::search)
        .custom_method("agent/compact", Backend::compact)
        .finish();

    let (to_server, server_input) = tokio::io::duplex(1 << 16);
    let (server_output, from_server) = tokio::io::duplex(1 << 16);
    let (errors_tx, errors_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(transport::pump_input(input, to_server, errors_tx));
    let writer = tokio::spawn(transport::pump_output(from_server, errors_rx, output));

    crate::tools::truncate::spawn_cleanup();
    Server::new(server_input, server_output, socket)
        .serve(service)
        .await;
    // The server's output is closed now; let the writer flush what is left.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    if shutdown_requested.load(Ordering::SeqCst) {
        0
    } else {
        1
    }
}
