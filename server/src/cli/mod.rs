//! The command line: the LSP server (default) and the commands around it.

mod doctor;
mod journal;
mod knowledge;
mod memory;
mod permission;
mod run;
mod session;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A language server that puts a coding agent inside any LSP editor.
///
/// With no command, serves the Language Server Protocol on stdin/stdout: point your editor's
/// LSP client at `agent-lsp`. Logs go to stderr (level from AGENT_LSP_LOG, e.g.
/// AGENT_LSP_LOG=debug) or to --log-file. Data lives in $AGENT_LSP_DATA_DIR (default
/// $XDG_DATA_HOME/agent-lsp); configuration in $XDG_CONFIG_HOME/agent-lsp/config.toml and
/// <workspace>/.agent-lsp.toml.
#[derive(Debug, Parser)]
#[command(name = "agent-lsp", version, about, long_about)]
pub struct Cli {
    /// Write logs to this file instead of stderr.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Language Server Protocol over stdio (the default).
    Lsp,
    /// Serve the Agent Client Protocol over stdio (Zed, JetBrains, Emacs, CodeCompanion).
    Acp,
    /// Inspect and maintain stored sessions.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Inspect and clean the hidden snapshot repository of a workspace.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// Run one agent turn headless: stream the answer, run tools, exit.
    Run(run::RunArgs),
    /// The workspace's memory facts: add, list, surface, why, update, forget, export.
    Memory {
        #[command(subcommand)]
        command: memory::MemoryCommand,
        #[command(flatten)]
        place: memory::Place,
    },
    /// The journal (`[journal] enabled = true` gives the model its tools): list, search, show.
    Journal {
        #[command(subcommand)]
        command: journal::JournalCommand,
        #[command(flatten)]
        place: memory::Place,
    },
    /// Long-term knowledge: list, add, forget, curate, export to the agents file (AGENTS.md).
    Knowledge {
        #[command(subcommand)]
        command: knowledge::KnowledgeCommand,
        #[command(flatten)]
        place: memory::Place,
    },
    /// The "always" answers saved for the workspace: list, revoke.
    Permission {
        #[command(subcommand)]
        command: permission::PermissionCommand,
        #[command(flatten)]
        place: memory::Place,
    },
    /// Check the setup: configuration layers, data directory, database, provider.
    Doctor {
        /// The workspace to check (default: the current directory's project).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The editor's settings (its initializationOptions) as JSON, layered over the
        /// files as the server would: how the editors' health checks see their own setup.
        #[arg(long, value_name = "JSON")]
        settings: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Size, loose objects and packs of the hidden repository.
    Stats {
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Remove snapshot objects no session refers to, once they are 7 days old.
    Gc {
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List sessions, most recently updated first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one session: its messages, parts, pending input and todos.
    Show {
        /// The session id (a unique prefix is enough).
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Search every message and tool result (the recall index), best matches first.
    Search {
        /// Words to look for; identifiers match their words (`user store` finds `userStore`).
        query: String,
        /// Only this session (a unique prefix is enough).
        #[arg(long)]
        session: Option<String>,
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Distil the session now: observe every undistilled message, consolidate if due, and
    /// start a context whose raw part is the latest turn (the log keeps everything).
    Compact {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Recompute every projection from the event log.
    Rebuild,
    /// Put the files back as they were before MESSAGE_ID (the messages stay until the next
    /// prompt, so `unrevert` can bring everything back).
    Revert {
        id: String,
        message_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Bring back what the last revert undid.
    Unrevert {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Revert the last prompt's whole turn; prints the prompt's text.
    Undo {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Redo what undo reverted.
    Redo {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

/// Runs a non-LSP command; returns the process exit code.
pub async fn run(command: Command) -> i32 {
    let result = match command {
        Command::Lsp => unreachable!("main serves LSP itself"),
        Command::Acp => return crate::acp::serve().await,
        Command::Session(cmd) => session::run(cmd).await,
        Command::Doctor {
            cwd,
            json,
            settings,
        } => doctor::run(cwd, json, settings.as_deref()).await,
        Command::Run(args) => run::run(args).await,
        Command::Snapshot(cmd) => session::snapshot(cmd),
        Command::Memory { command, place } => memory::run(command, place).await,
        Command::Journal { command, place } => journal::run(command, place).await,
        Command::Knowledge { command, place } => knowledge::run(command, place).await,
        Command::Permission { command, place } => permission::run(command, place),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("agent-lsp: {e:#}");
            1
        }
    }
}
