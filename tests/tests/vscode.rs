//! The VS Code extension (editors/vscode) in a real VS Code: code-server with the packaged
//! .vsix, driven by playwright-core in Chromium (editors/vscode/test/e2e.mjs), against the
//! real server and fake-llm: chat, approvals, edits, revert, the Memory view on seeded
//! facts, the journal's search and the knowledge export; and (language-servers.mjs) the
//! agent using the built-in TypeScript extension. The scripts' exit code is the verdict.
//!
//! Needs what `scripts/test` prepares: `editors/vscode/agent-lsp.vsix` (npm run package) and
//! code-server with playwright-core in `~/.cache/agent-lsp/vscode-e2e`
//! (editors/vscode/scripts/setup-code-server).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use agent_lsp_tests::memory;
use agent_lsp_tests::process::{
    FakeLlm, ModelServer, TestEnv, agent_lsp_bin, answer_edit_turns, repo_root,
};
use serde_json::json;

/// Runs the end-to-end script `script` (in editors/vscode/test) on `env`'s workspace; fails
/// unless it passes. `artifacts` is where it saves screenshots.
fn run_script(script: &str, env: &TestEnv, artifacts: &std::path::Path) {
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
    let mut cmd = Command::new("node");
    env.apply(&mut cmd);
    // The script's output goes straight to the test's (its steps show as they pass).
    let status = cmd
        .arg(repo_root().join("editors/vscode/test").join(script))
        .env("NODE_PATH", cache.join("node_modules"))
        .env("CODE_SERVER", &code_server)
        .env("VSIX", &vsix)
        .env("WORKSPACE", env.workspace())
        .env("AGENT_LSP_BIN", agent_lsp_bin())
        .env("ARTIFACTS", artifacts)
        .env("FAKE_KEY", "k")
        .current_dir(&cache)
        .stdin(Stdio::null())
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "{script} failed ({status}); its output is above, a screenshot in {}",
        artifacts.display()
    );
}

#[test]
fn the_extension_asks_approves_edits_and_reverts_in_code_server() {
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

    run_script("e2e.mjs", &env, &artifacts);
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

/// Issue 19 in a real VS Code with a real language server (the built-in TypeScript
/// extension): after the agent's edit the model's next request holds TypeScript's new error
/// (not the one the file had before), and its `lsp` call gets TypeScript's definition.
#[test]
fn the_agent_sees_typescripts_diagnostics_and_definitions_through_code_server() {
    let turns = json!([
        // VS Code tells the server of the open file a little after showing it (see above).
        {"fault": {"delay_ms": 1500}, "expect": {"tools_include": ["lsp"]},
         "reply": {"tool_calls": [{"name": "edit", "arguments": {
            "filePath": "src/calc.ts",
            "oldString": "return total(prices);",
            "newString": "return total(prices) + \"shipping\";"}}]}},
        {"reply": {"tool_calls": [{"name": "lsp", "arguments": {
            "operation": "goToDefinition", "filePath": "src/calc.ts", "line": 8, "character": 10}}]}},
        {"reply": {"text": "All done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    env.write_user_config(&format!(
        "{}[permission]\nedit = \"allow\"\n",
        ModelServer::fake(&llm, "openai").config()
    ));
    let src = env.workspace().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("calc.ts"),
        "export function total(prices: number[]): number {\n  return prices.reduce((a, b) => a + b, 0);\n}\n\n\
         export const discount: number = \"none\";\n\n\
         export function checkout(prices: number[]): number {\n  return total(prices);\n}\n",
    )
    .unwrap();
    run_script(
        "language-servers.mjs",
        &env,
        &repo_root().join("target/test-artifacts/vscode-language-servers"),
    );

    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "three model requests: {requests:?}");
    let after_edit = requests[1].body.to_string();
    assert!(
        after_edit.contains("report 1 new error after this change")
            && after_edit.contains("src/calc.ts:8:")
            && after_edit.contains("error: Type 'string' is not assignable to type 'number'")
            && after_edit.contains("[ts 2322]"),
        "TypeScript's new error, and only it, reached the model: {after_edit}"
    );
    let after_lsp = requests[2].body.to_string();
    assert!(
        after_lsp.contains("src/calc.ts:1:17: export function total(prices: number[]): number {"),
        "TypeScript's definition reached the model: {after_lsp}"
    );
}
