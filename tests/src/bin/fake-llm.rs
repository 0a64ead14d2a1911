//! fake-llm: replays a model script over HTTP in the OpenAI or Anthropic wire format.
//!
//! Prints `listening on http://127.0.0.1:PORT` as its first line on stdout.

use std::path::PathBuf;

use agent_lsp::provider::script::Script;
use agent_lsp_tests::fake_llm::{self, Format};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "fake-llm",
    about = "A loopback model server that replays a script"
)]
struct Args {
    /// The model script (JSON).
    script: PathBuf,
    /// Which provider's wire format to serve.
    #[arg(long, value_enum, default_value = "openai")]
    format: Format,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append every request received to this file, one JSON object per line.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let script = match Script::from_file(&args.script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake-llm: {e}");
            std::process::exit(2);
        }
    };
    // The usage it reports counts tokens with the o200k table: load it before listening, so
    // that a benchmark's first request does not wait for the fake's own start-up.
    agent_lsp::tokens::count("warm");
    if let Err(e) = fake_llm::serve(script, args.format, args.port, args.record).await {
        eprintln!("fake-llm: {e}");
        std::process::exit(1);
    }
}
