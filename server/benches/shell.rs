//! What checking a `bash` call's command line costs: `permission::shell::analyse` (one
//! tree-sitter-bash parse and the walk) on typical lines, against the floor of splitting the
//! same line into words with `shlex` (what any check must at least do), as a ratio.
//!
//! Run with `cargo bench -p agent-lsp --bench shell`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use agent_lsp::permission::shell::analyse;

const LINES: &[&str] = &[
    "ls -la",
    "git status && git diff",
    "cargo test -p agent-lsp --lib -- snapshot 2>&1 | tail -40",
    "echo \"$(date)\" > out.txt",
    "find . -name '*.rs' -exec grep -n TODO {} \\; | head -20",
    "for f in src/*.rs; do rustfmt --check \"$f\" || echo \"$f\"; done",
];

/// The median over `runs` of the time per call of `f`, each run `per` calls.
fn time(runs: usize, per: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..per {
                f();
            }
            started.elapsed() / per as u32
        })
        .collect();
    samples.sort();
    samples[runs / 2]
}

fn main() {
    println!("| line | analyse | shlex split (floor) | ratio |");
    println!("|---|---|---|---|");
    for line in LINES {
        let ours = time(11, 2_000, || {
            black_box(analyse(black_box(line)));
        });
        let floor = time(11, 2_000, || {
            black_box(shlex::split(black_box(line)));
        });
        println!(
            "| `{line}` | {:.1} µs | {:.2} µs | {:.0} |",
            ours.as_secs_f64() * 1e6,
            floor.as_secs_f64() * 1e6,
            ours.as_secs_f64() / floor.as_secs_f64()
        );
    }
}
