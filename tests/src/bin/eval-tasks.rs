//! `eval-tasks`: the task evaluation (see `agent_lsp_tests::task_eval`). Without
//! `--base-url` each task replays its oracle script through fake-llm, which tests the
//! harness and the checks (exit 1 unless every task passes); with a real server it prints
//! how the model did:
//!
//!     scripts/eval-tasks --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder:7b
//!
//! Needs the workspace's binaries built (`cargo build --workspace --bins`; the script does).

use std::time::Duration;

use agent_lsp_tests::process::ModelServer;
use agent_lsp_tests::task_eval::{self, Model, Options};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// The model server (e.g. Ollama's http://127.0.0.1:11434/v1); the oracle script when
    /// absent.
    #[arg(long, requires = "model")]
    base_url: Option<String>,
    #[arg(long)]
    model: Option<String>,
    /// `openai` (any OpenAI-compatible server) or `anthropic`.
    #[arg(long, default_value = "openai")]
    provider: String,
    /// The environment variable holding the server's key, if it needs one.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Seconds a task may take before it is stopped and failed.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Only the tasks whose names contain this.
    #[arg(long)]
    only: Option<String>,
    /// A line of the agent's configuration (TOML), e.g. `max_output_tokens = 1024` for a
    /// small window; may be repeated.
    #[arg(long = "config", value_name = "TOML")]
    config: Vec<String>,
}

fn main() {
    let args = Args::parse();
    let model = match (args.base_url, args.model) {
        (Some(base_url), Some(model)) => Model::Server(ModelServer {
            provider: args.provider,
            base_url,
            model,
            api_key_env: args.api_key_env,
        }),
        _ => Model::Oracle,
    };
    let oracle = matches!(model, Model::Oracle);
    let report = task_eval::run(&Options {
        model,
        timeout: Duration::from_secs(args.timeout),
        only: args.only,
        config: args.config.iter().map(|l| format!("{l}\n")).collect(),
    });
    match report {
        Ok(report) => {
            print!("{}", report.table());
            if oracle && report.passed() < report.outcomes.len() {
                eprintln!("eval-tasks: the oracle failed a task; the harness or a task is broken");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("eval-tasks: {e}");
            std::process::exit(2);
        }
    }
}
