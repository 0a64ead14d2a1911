//! `context-eval`: the context evaluation (see `agent_lsp_tests::context_eval`), against
//! fake-llm or, with `--base-url` and `--model`, any OpenAI-compatible server:
//!
//!     cargo run -p agent-lsp-tests --bin context-eval -- \
//!         --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder:7b --window 32768
//!
//! Needs the workspace's binaries built (`cargo build --workspace --bins`).

use agent_lsp_tests::context_eval::{self, Endpoint, Options};
use agent_lsp_tests::process::ModelServer;
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// An OpenAI-compatible endpoint (e.g. Ollama's http://127.0.0.1:11434/v1); fake-llm
    /// when absent.
    #[arg(long, requires = "model")]
    base_url: Option<String>,
    #[arg(long)]
    model: Option<String>,
    /// The environment variable holding the endpoint's key, if it needs one.
    #[arg(long)]
    api_key_env: Option<String>,
    #[arg(long, default_value_t = 32_768)]
    window: u32,
    /// Turns before the questions.
    #[arg(long, default_value_t = 150)]
    turns: usize,
}

fn main() {
    let args = Args::parse();
    let endpoint = match (args.base_url, args.model) {
        (Some(base_url), Some(model)) => Endpoint::Server(ModelServer {
            provider: "openai".into(),
            base_url,
            model,
            api_key_env: args.api_key_env,
        }),
        _ => Endpoint::Fake,
    };
    let report = context_eval::run(&Options {
        endpoint,
        window: args.window,
        turns: args.turns.max(25),
    });
    print!("{}", report.table());
}
