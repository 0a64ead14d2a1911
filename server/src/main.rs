use clap::Parser;

use agent_lsp::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let serving_lsp = matches!(cli.command, None | Some(Command::Lsp | Command::Acp));
    // The LSP and ACP servers log at info; other commands keep stderr for their own messages.
    let default_level = if serving_lsp { "info" } else { "warn" };
    if let Err(e) = agent_lsp::logging::init(cli.log_file.as_deref(), default_level) {
        eprintln!("agent-lsp: cannot open the log file: {e}");
        std::process::exit(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agent-lsp: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            None | Some(Command::Lsp) => {
                agent_lsp::lsp::serve(tokio::io::stdin(), tokio::io::stdout()).await
            }
            Some(command) => agent_lsp::cli::run(command).await,
        }
    });
    // Exit without waiting for the runtime: a blocking stdin read would hold shutdown.
    std::process::exit(code);
}
