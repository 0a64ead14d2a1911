//! grep and glob over a generated 20,000-file tree, against ripgrep run as a subprocess on
//! the same tree, as ratios in one run. Needs `rg` on PATH (Debian: `apt-get install ripgrep`).
//!
//! Run with `cargo bench -p agent-lsp --bench search`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_lsp::config::Config;
use agent_lsp::editor::{Headless, PermissionReply};
use agent_lsp::tools::{Registry, ToolContext};

fn generate(root: &Path) {
    std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    for i in 0..20_000 {
        let dir = root.join(format!("pkg{:02}/mod{:02}", i % 40, (i / 40) % 25));
        std::fs::create_dir_all(&dir).unwrap();
        let ext = ["rs", "ts", "py", "md"][i % 4];
        let mut body = String::new();
        for line in 0..60 {
            body.push_str(&format!(
                "fn item_{i}_{line}(value: usize) -> usize {{ value * {line} }}\n"
            ));
        }
        if i % 200 == 0 {
            body.push_str("// NEEDLE: the rare marker the benchmark searches for\n");
        }
        std::fs::write(dir.join(format!("file{i}.{ext}")), body).unwrap();
    }
    let ignored = root.join("ignored");
    std::fs::create_dir_all(&ignored).unwrap();
    std::fs::write(ignored.join("x.rs"), "// NEEDLE ignored\n").unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    f(); // warm the page cache
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("search bench: `rg` is not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir_all(&root).unwrap();
    generate(&root);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let editor = Arc::new(Headless {
        answer: PermissionReply::Once,
    });
    let ctx = ToolContext::new(&root, &Config::default(), editor);
    let registry = Registry::standard();
    let call = |name: &str, args: &str| {
        let r = runtime.block_on(registry.call(name, args, registry.version(), &ctx));
        assert!(r.output.len() > 10, "{}", r.output);
        r
    };

    let ours = time(7, || {
        let r = call("grep", r#"{"pattern": "NEEDLE"}"#);
        assert!(r.output.contains("NEEDLE"), "{}", r.output);
    });
    let rg = time(7, || {
        let out = Command::new("rg")
            .args(["-n", "NEEDLE", "."])
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(!out.stdout.is_empty());
    });
    println!(
        "grep over 20,000 files: agent-lsp {:.1} ms, rg subprocess {:.1} ms, ratio {:.2}",
        ours.as_secs_f64() * 1e3,
        rg.as_secs_f64() * 1e3,
        ours.as_secs_f64() / rg.as_secs_f64()
    );

    let ours = time(7, || {
        call("glob", r#"{"pattern": "**/*.rs"}"#);
    });
    let rg = time(7, || {
        let out = Command::new("rg")
            .args(["--files", "-g", "*.rs"])
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(!out.stdout.is_empty());
    });
    println!(
        "glob over 20,000 files: agent-lsp {:.1} ms, rg --files subprocess {:.1} ms, ratio {:.2}",
        ours.as_secs_f64() * 1e3,
        rg.as_secs_f64() * 1e3,
        ours.as_secs_f64() / rg.as_secs_f64()
    );
}
