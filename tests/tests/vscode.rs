//! The VS Code extension (editors/vscode) in a real VS Code: code-server with the packaged
//! .vsix, driven by playwright-core in Chromium (editors/vscode/test/e2e.mjs), against the
//! real server and fake-llm: chat, approvals, edits, revert, the Memory view on seeded
//! facts, the journal's search and the knowledge export. The script's exit code is the verdict.
//!
//! Needs what `scripts/test` prepares: `editors/vscode/agent-lsp.vsix` (npm run package) and
//! code-server with playwright-core in `~/.cache/agent-lsp/vscode-e2e`
//! (editors/vscode/scripts/setup-code-server).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use agent_lsp_tests::memory;
use agent_lsp_tests::process::{FakeLlm, TestEnv, agent_lsp_bin, answer_edit_turns, repo_root};
use serde_json::json;

#[test]
fn the_extension_asks_approves_edits_and_reverts_in_code_server() {
    let vsix = repo_root().join("editors/vscode/agent-lsp.vsix");
    // Where editors/vscode/scripts/setup-code-server installs (shared by every clone).
    let cache = std::env::var_os("AGENT_LSP_VSCODE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache")
                })
                .join("agent-lsp/vscode-e2e")
        });
    let code_server = cache.join("node_modules/code-server/out/node/entry.js");
    assert!(
        vsix.exists() && code_server.exists(),
        "run scripts/test first: it packages {} and installs code-server into {}",
        vsix.display(),
        cache.display()
    );

    // The first answer waits a moment: VS Code tells the server of the open file (didOpen)
    // a little after showing it, and an edit made before that goes to the disk (the race
    // the README's notes describe); this test is about the editor's flows, not that race.
    let mut turns = answer_edit_turns();
    turns[0]["fault"] = json!({"delay_ms": 1500});
    // After the edit the model checkpoints: the chat view's bar shows the focus and phase.
    let answer = turns[1]["reply"].take();
    turns[1]["reply"] = json!({"tool_calls": [{"name": "context_checkpoint", "arguments": {
        "focus": "the answer function", "phase": "testing"}}]});
    turns.push(json!({ "reply": answer }));
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    env.answer_workspace(&llm);
    memory::seed_for_inspector(&env);
    agent_lsp_tests::memory::seed_journal(&env);
    agent_lsp_tests::memory::add_knowledge(&env, "Deploys go out on Thursdays", "decision");
    let artifacts = repo_root().join("target/test-artifacts/vscode");
    let _ = std::fs::remove_file(artifacts.join("chat.png"));

    let mut cmd = Command::new("node");
    env.apply(&mut cmd);
    // The script's output goes straight to the test's (its steps show as they pass).
    let status = cmd
        .arg(repo_root().join("editors/vscode/test/e2e.mjs"))
        .env("NODE_PATH", cache.join("node_modules"))
        .env("CODE_SERVER", &code_server)
        .env("VSIX", &vsix)
        .env("WORKSPACE", env.workspace())
        .env("AGENT_LSP_BIN", agent_lsp_bin())
        .env("ARTIFACTS", &artifacts)
        .env("FAKE_KEY", "k")
        .current_dir(&cache)
        .stdin(Stdio::null())
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "e2e.mjs failed ({status}); its output is above, a screenshot in {}",
        artifacts.display()
    );
    let png = std::fs::read(artifacts.join("chat.png")).expect("the chat screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    // The model saw the prompt, the edit's and the checkpoint's results (e2e.mjs checked the disk after the
    // revert, before its reload).
    assert_eq!(
        llm.requests().len(),
        3,
        "the edit, the checkpoint, the answer"
    );
    // The Memory view's edit and forget reached the store.
    memory::assert_inspector_edits(&env);
}
