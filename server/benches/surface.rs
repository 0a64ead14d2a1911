//! The surface pipeline on its DEV set and on the held-out set: Recall@5, MRR, precision and
//! the false-surface rate per category (see `agent_lsp::facts::dev`).

use agent_lsp::facts::dev::{Set, table};

fn main() {
    println!("DEV set (tuned on)\n\n{}", table(Set::Dev));
    println!("held-out set (not tuned on)\n\n{}", table(Set::HeldOut));
}
