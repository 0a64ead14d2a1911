//! `model-smoke`: the real-model smoke checks (see `agent_lsp_tests::model_smoke`) against a
//! running server; `scripts/real-model-smoke` installs and starts llama.cpp's and runs this.
//!
//!     model-smoke --base-url http://127.0.0.1:8080/v1 --model gemma-3-270m
//!
//! Exit 0 when every check passes, 1 otherwise.

use std::time::Duration;

use agent_lsp_tests::model_smoke;
use agent_lsp_tests::process::ModelServer;
use clap::Parser;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    base_url: String,
    #[arg(long)]
    model: String,
    /// `openai` (any OpenAI-compatible server) or `anthropic`.
    #[arg(long, default_value = "openai")]
    provider: String,
    /// The environment variable holding the server's key, if it needs one.
    #[arg(long)]
    api_key_env: Option<String>,
    /// Seconds each check may take.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

fn main() {
    let args = Args::parse();
    let server = ModelServer {
        provider: args.provider,
        base_url: args.base_url,
        model: args.model,
        api_key_env: args.api_key_env,
    };
    let report = model_smoke::run(&server, Duration::from_secs(args.timeout));
    print!("{}", report.table());
    if !report.passed() {
        std::process::exit(1);
    }
}
