//! The editor surface: LSP over stdio.

mod actions;
pub mod bridge;
mod coalescer;
pub mod documents;
pub mod error;
mod host;
mod intelligence;
pub mod protocol;
mod server;
pub mod transport;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tower_lsp_server::ls_types::request::Request as _;
use tower_lsp_server::{LspService, Server};

use protocol::{
    Cancel, Compact, DocumentText, GetConfig, GetState, History, JournalSearch, KnowledgeExport,
    MemoryForget, MemoryList, MemoryUpdate, MemoryWhy, Prompt, Redo, Revert, Search, Sessions,
    SetMode, Undo, Unrevert,
};

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
        .custom_method(DocumentText::METHOD, Backend::document_text)
        .custom_method(GetConfig::METHOD, Backend::config)
        .custom_method(GetState::METHOD, Backend::session_state)
        .custom_method(MemoryList::METHOD, Backend::memory_list)
        .custom_method(MemoryWhy::METHOD, Backend::memory_why)
        .custom_method(MemoryUpdate::METHOD, Backend::memory_update)
        .custom_method(MemoryForget::METHOD, Backend::memory_forget)
        .custom_method(JournalSearch::METHOD, Backend::journal_search)
        .custom_method(KnowledgeExport::METHOD, Backend::knowledge_export)
        .custom_method(Prompt::METHOD, Backend::prompt)
        .custom_method(Cancel::METHOD, Backend::cancel)
        .custom_method(Sessions::METHOD, Backend::sessions)
        .custom_method(History::METHOD, Backend::history)
        .custom_method(Revert::METHOD, Backend::revert)
        .custom_method(Unrevert::METHOD, Backend::unrevert)
        .custom_method(Undo::METHOD, Backend::undo)
        .custom_method(Redo::METHOD, Backend::unrevert)
        .custom_method(SetMode::METHOD, Backend::set_mode)
        .custom_method(Search::METHOD, Backend::search)
        .custom_method(Compact::METHOD, Backend::compact)
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
