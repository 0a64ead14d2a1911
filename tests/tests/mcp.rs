//! MCP servers with real servers from npm (`tests/mcp-servers`, installed by scripts/test):
//! `@modelcontextprotocol/server-everything` over stdio, Streamable HTTP and the older
//! HTTP+SSE, a server
//! that does not exist, a disabled one and a header whose variable is missing, as
//! `agent-lsp doctor --json` reports them; no server process outlives the check; and the
//! model calling a server's tools through the real binary (fake-llm).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_lsp_tests::cli_run;
use agent_lsp_tests::process::{FakeLlm, TestEnv, repo_root};
use serde_json::{Value, json};

fn everything() -> PathBuf {
    let path = repo_root().join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        path.exists(),
        "run scripts/test first: it installs the MCP servers into tests/mcp-servers"
    );
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything serving HTTP (`streamableHttp` or the older `sse`), killed when dropped.
struct HttpServer(Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_server(mode: &str, port: u16) -> HttpServer {
    let child = Command::new("node")
        .arg(everything())
        .arg(mode)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "server-everything did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpServer(child)
}

/// Processes whose environment holds `marker` (the local servers this test started).
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if String::from_utf8_lossy(&environ).contains(marker) {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

/// A variable that marks the servers one test starts: `KEY=value`, and the `environment`
/// line that gives it to a server.
fn marker(test: &str) -> (String, String) {
    let key = format!("AGENT_LSP_MCP_{test}");
    let value = std::process::id();
    (
        format!("{key}={value}"),
        format!("environment = {{ {key} = \"{value}\" }}\n"),
    )
}

/// `[mcp.everything]`: server-everything on stdio, with `more` lines of its table.
fn everything_stdio(more: &str) -> String {
    format!(
        "\n[mcp.everything]\ntype = \"local\"\ncommand = [\"node\", \"{}\", \"stdio\"]\n{more}",
        everything().display()
    )
}

/// Fails unless every server process with `marker` is gone within 5 s of `after`.
fn assert_none_left(marker: &str, after: &str) {
    let ended = Instant::now();
    while !processes_with(marker).is_empty() {
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "an MCP server outlived {after}: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn doctor_reports_each_mcp_server_from_real_servers() {
    let port = free_port();
    let _http = http_server("streamableHttp", port);
    let env = TestEnv::new();
    let (marker, environment) = marker("DOCTOR_TEST");
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        format!(
            r#"
[mcp.everything]
type = "local"
command = ["node", "{everything}", "stdio"]
{environment}
[mcp.remote]
type = "remote"
url = "http://127.0.0.1:{port}/mcp"

[mcp.missing]
type = "local"
command = ["agent-lsp-no-such-mcp-server"]

[mcp.off]
type = "local"
command = ["node", "{everything}", "stdio"]
enabled = false

[mcp.secret]
type = "remote"
url = "http://127.0.0.1:{port}/mcp"
headers = {{ Authorization = "Bearer {{env:AGENT_LSP_TEST_UNSET_TOKEN}}" }}

[mcp.refused]
type = "remote"
url = "http://127.0.0.1:{closed}/mcp"
"#,
            everything = everything().display(),
            closed = free_port(),
        ),
    )
    .unwrap();
    let (code, out, err) = env.run(&[
        "doctor",
        "--json",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "three servers fail, so doctor does: {out}\n{err}");
    let report: Value = serde_json::from_str(&out).expect("doctor --json");
    let server = |name: &str| {
        report["mcp"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {report}"))
            .clone()
    };
    for (name, transport) in [("everything", "stdio"), ("remote", "http")] {
        let s = server(name);
        assert_eq!(s["state"], "running", "{s}");
        assert_eq!(s["transport"], transport, "{s}");
        assert!(
            s["tools"].as_u64().unwrap() >= 5,
            "server-everything's tools: {s}"
        );
    }
    let missing = server("missing");
    assert_eq!(missing["state"], "failed");
    assert!(
        missing["reason"]
            .as_str()
            .unwrap()
            .contains("cannot start agent-lsp-no-such-mcp-server"),
        "{missing}"
    );
    assert_eq!(server("off")["state"], "disabled");
    let secret = server("secret");
    assert_eq!(secret["state"], "failed");
    assert!(
        secret["reason"]
            .as_str()
            .unwrap()
            .contains("$AGENT_LSP_TEST_UNSET_TOKEN is not set"),
        "{secret}"
    );
    let refused = server("refused");
    assert_eq!(refused["state"], "failed");
    let why = refused["reason"].as_str().unwrap();
    assert!(
        why.starts_with("cannot reach http://127.0.0.1:") && why.contains("refused"),
        "in a user's words, not the MCP library's layers: {refused}"
    );
    assert!(
        !err.contains("worker quit"),
        "one report of the failure, not the library's log too: {err}"
    );
    let line = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp everything")
        .expect("a check line per server");
    assert!(
        line["detail"].as_str().unwrap().starts_with("stdio, "),
        "{line}"
    );

    // The stdio server went with the check.
    assert_none_left(&marker, "doctor");
}

#[test]
fn the_model_calls_an_mcp_servers_tools_and_reads_their_results() {
    let turns = json!([
        {"expect": {"tools_include": ["everything_echo", "everything_get-sum", "read"]},
         "reply": {"tool_calls": [
            {"name": "everything_echo", "arguments": {"message": "hello from the model"}},
            {"name": "everything_get-tiny-image", "arguments": {}},
            {"name": "everything_get-sum", "arguments": {"a": "two", "b": 3}},
            {"name": "everything_no-such-tool", "arguments": {}}]}},
        {"reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(&llm, "openai", &everything_stdio(""));
    let run = cli_run::run(&env, &["--yes", "use the everything server"]);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let results = requests[1].body.to_string();
    assert!(
        results.contains("Echo: hello from the model"),
        "the echo's text: {results}"
    );
    assert!(
        results.contains("[image: image/png, "),
        "the image summarised: {results}"
    );
    assert!(
        results.contains("everything_get-sum") && results.contains("Invalid"),
        "a bad argument answered by the server as an error: {results}"
    );
    assert!(
        results.contains("there is no tool named \\\"everything_no-such-tool\\\""),
        "an unknown tool: {results}"
    );
}

#[test]
fn mcp_tools_go_through_permissions_and_plan_mode() {
    let turns = json!([
        {"reply": {"tool_calls": [
            {"name": "everything_echo", "arguments": {"message": "denied"}},
            {"name": "everything_toggle-simulated-logging", "arguments": {}},
            {"name": "everything_get-sum", "arguments": {"a": 2, "b": 3}}]}},
        {"reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(
        &llm,
        "openai",
        &format!(
            "[permission]\neverything_echo = \"deny\"\neverything_get-sum = \"allow\"\n{}",
            everything_stdio("")
        ),
    );
    let run = cli_run::run(&env, &["--mode", "plan", "look around"]);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    let results = llm.requests()[1].body.to_string();
    assert!(
        results.contains("permission denied by configuration: everything_echo"),
        "a deny rule keyed by the tool's full name: {results}"
    );
    assert!(
        results.contains(
            "plan mode is read-only, and everything_toggle-simulated-logging may change things"
        ),
        "plan mode refuses a tool its server does not call read-only: {results}"
    );
    assert!(
        results.contains("The sum of 2 and 3 is 5"),
        "a read-only tool runs in plan mode: {results}"
    );
}

/// A server killed during a call: the call answers a clear error, the next step starts the
/// server again and its tools work; and no server process outlives the run.
#[test]
fn a_server_killed_mid_call_is_restarted_on_the_next_step() {
    let turns = json!([
        {"reply": {"tool_calls": [{"name": "everything_trigger-long-running-operation",
                                   "arguments": {"duration": 30, "steps": 30}}]}},
        {"expect": {"last_message_contains": "stopped during the call"},
         "reply": {"tool_calls": [{"name": "everything_echo", "arguments": {"message": "again"}}]}},
        {"expect": {"last_message_contains": "Echo: again"}, "reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let (marker, environment) = marker("KILL_TEST");
    let env = cli_run::setup(
        &llm,
        "openai",
        &everything_stdio(&format!("{environment}timeout_ms = 60000\n")),
    );
    let child = cli_run::spawn(&env, &["--yes", "run the long operation"]);
    // Once the long call has reached the server, kill the server.
    let started = Instant::now();
    let pid = loop {
        if llm.requests().len() == 1
            && let Some(pid) = processes_with(&marker).first().cloned()
        {
            std::thread::sleep(Duration::from_millis(700));
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    Command::new("kill").args(["-9", &pid]).status().unwrap();
    let run = cli_run::finish(child);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    assert_eq!(
        llm.requests().len(),
        3,
        "the echo ran on a restarted server"
    );
    assert_none_left(&marker, "the run");
}

/// A server that cannot start is told once (not at every step), and the session goes on.
#[test]
fn a_server_that_cannot_start_is_reported_once_and_the_session_goes_on() {
    let turns = json!([
        {"reply": {"tool_calls": [{"name": "read", "arguments": {"filePath": "src/lib.rs"}}]}},
        {"expect": {"last_message_contains": "pub fn answer"}, "reply": {"text": "Read it."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(
        &llm,
        "openai",
        "[mcp.gone]\ntype = \"local\"\ncommand = [\"agent-lsp-no-such-mcp-server\"]\n",
    );
    let run = cli_run::run(&env, &["--yes", "read the library"]);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    let errors: Vec<String> = run
        .of_type("error")
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(errors.len(), 1, "told once over two steps: {errors:?}");
    assert!(
        errors[0]
            .contains("MCP server gone is unavailable: cannot start agent-lsp-no-such-mcp-server"),
        "{errors:?}"
    );
    assert!(run.text().contains("Read it."));
}

fn filesystem_server() -> PathBuf {
    let path = repo_root().join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        path.exists(),
        "run scripts/test first: it installs the MCP servers"
    );
    path
}

/// server-filesystem, allowed the workspace only: its tools read there, its own boundary
/// refuses outside; and an MCP server does not weaken ours — our `read` of a file outside
/// the workspace is still refused by `external_directory`, and the server's write is an ask
/// that names the server (refused here).
#[test]
fn the_filesystem_server_and_our_workspace_boundary() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside the workspace").unwrap();
    let secret = secret.to_str().unwrap().to_string();
    let turns = json!([
        {"reply": {"tool_calls": [
            {"name": "files_read_text_file", "arguments": {"path": "src/lib.rs"}},
            {"name": "files_read_text_file", "arguments": {"path": secret}},
            {"name": "read", "arguments": {"filePath": secret}},
            {"name": "files_write_file", "arguments": {"path": "notes.txt", "content": "x"}}]}},
        {"reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(&llm, "openai", "");
    let workspace = env.workspace().to_str().unwrap().to_string();
    cli_run::point_at(
        &env,
        &llm,
        &format!(
            "[mcp.files]\ntype = \"local\"\ncommand = [\"node\", \"{}\", \"{workspace}\"]\n",
            filesystem_server().display()
        ),
    );
    std::fs::write(
        env.config_home().join("agent-lsp/config.toml"),
        format!(
            "{}\n[permission]\nfiles_read_text_file = \"allow\"\n",
            std::fs::read_to_string(env.config_home().join("agent-lsp/config.toml")).unwrap()
        ),
    )
    .unwrap();
    // No --yes: every ask is answered no (stdin is not a terminal).
    let run = cli_run::run(&env, &["look at the files"]);
    let result = |id: &str| {
        run.lines
            .iter()
            .find(|l| l["type"] == "tool_result" && l["id"] == id)
            .map(|l| l["output"].as_str().unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("no result for {id}: {:?}", run.lines))
    };
    assert!(
        result("call_0_0").contains("pub fn answer"),
        "the server reads in the workspace"
    );
    let refused = result("call_0_1");
    assert!(
        refused.contains("outside allowed directories")
            && !refused.contains("outside the workspace"),
        "the server's own boundary: {refused}"
    );
    assert!(
        result("call_0_2").contains("external_directory"),
        "our read outside the workspace is still refused by our boundary"
    );
    let asks: Vec<String> = run
        .lines
        .iter()
        .filter(|l| l["type"] == "permission" && l["event"] == "asked")
        .map(|a| {
            a["request"]["title"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        asks,
        ["MCP server files: write_file"],
        "only the write asks, naming the server"
    );
    assert!(result("call_0_3").contains("rejected"));
    assert!(
        !env.workspace().join("notes.txt").exists(),
        "a refused write did not happen"
    );
}

/// `agent/config` shows each server as the agent has it, starting none: not started before
/// the first prompt, running with its tools after.
#[tokio::test]
async fn agent_config_lists_the_mcp_servers_as_the_agent_has_them() {
    use agent_lsp_tests::lsp_client::prompted;
    let turns =
        json!([{"expect": {"tools_include": ["everything_echo"]}, "reply": {"text": "Hi."}}]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    let extra = format!(
        "{}\n[mcp.off]\ntype = \"remote\"\nurl = \"http://127.0.0.1:9/mcp\"\nenabled = false\n",
        everything_stdio("")
    );
    // Before any prompt: a server with no agent yet is not started.
    env.answer_workspace(&llm);
    let file = env.config_home().join("agent-lsp/config.toml");
    let base = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{base}{extra}")).unwrap();
    {
        let client = agent_lsp_tests::lsp_client::LspClient::spawn(&env, &[]);
        client
            .initialize(agent_lsp_tests::lsp_client::initialize_params(
                &env.workspace(),
            ))
            .await;
        let config = client.request("agent/config", json!({})).await.unwrap();
        assert_eq!(config["mcp"][0]["name"], "everything");
        assert_eq!(config["mcp"][0]["state"], "not_started", "{config}");
        assert_eq!(config["mcp"][1]["state"], "disabled", "{config}");
        assert_eq!(client.shutdown_and_exit().await, 0);
    }
    std::fs::write(&file, &base).unwrap();
    let (client, _) = prompted(&env, &llm, &extra, "hello").await;
    // The first step starts the servers.
    let started = Instant::now();
    let config = loop {
        let config = client.request("agent/config", json!({})).await.unwrap();
        if config["mcp"][0]["state"] == "running" || started.elapsed() > Duration::from_secs(20) {
            break config;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let everything = &config["mcp"][0];
    assert_eq!(everything["state"], "running", "{config}");
    assert_eq!(everything["transport"], "stdio");
    assert!(everything["tools"].as_u64().unwrap() >= 5, "{config}");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

/// The LSP server's local MCP servers go with it when the editor ends it.
#[tokio::test]
async fn no_mcp_server_outlives_the_language_server() {
    use agent_lsp_tests::lsp_client::prompted;
    let turns = json!([{"reply": {"text": "Hi."}}]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    let (marker, environment) = marker("LSP_TEST");
    let extra = everything_stdio(&environment);
    let (client, _) = prompted(&env, &llm, &extra, "hello").await;
    let started = Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.shutdown_and_exit().await, 0);
    assert_none_left(&marker, "the language server");
}

#[test]
fn a_server_that_only_speaks_the_older_http_sse_is_reached_over_it() {
    let port = free_port();
    let _sse = http_server("sse", port);
    let table = format!("\n[mcp.old]\ntype = \"remote\"\nurl = \"http://127.0.0.1:{port}/sse\"\n");
    let turns = json!([
        {"expect": {"tools_include": ["old_echo"]},
         "reply": {"tool_calls": [{"name": "old_echo", "arguments": {"message": "over SSE"}}]}},
        {"reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(&llm, "openai", &table);

    let (_, out, err) = env.run(&[
        "doctor",
        "--json",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}\n{err}"));
    let old = &report["mcp"][0];
    assert_eq!(old["state"], "running", "{old}");
    assert_eq!(old["transport"], "sse", "{old}");
    assert!(old["tools"].as_u64().unwrap() >= 5, "{old}");

    let run = cli_run::run(&env, &["--yes", "echo over the old transport"]);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests[1].body.to_string().contains("Echo: over SSE"),
        "the echo's answer came back over the event stream: {}",
        requests[1].body
    );
}

#[test]
fn a_changed_tool_list_reaches_the_model_at_the_next_step() {
    let server = repo_root().join("tests/mcp-servers/changing-tools.mjs");
    let table = format!(
        "\n[mcp.changing]\ntype = \"local\"\ncommand = [\"node\", \"{}\"]\n",
        server.display()
    );
    let turns = json!([
        {"expect": {"tools_include": ["changing_unlock"]},
         "reply": {"tool_calls": [{"name": "changing_unlock", "arguments": {}}]}},
        {"expect": {"tools_include": ["changing_unlocked"]},
         "reply": {"tool_calls": [{"name": "changing_unlocked", "arguments": {}}]}},
        {"reply": {"text": "Done."}},
    ]);
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = cli_run::setup(&llm, "openai", &table);
    let run = cli_run::run(&env, &["--yes", "unlock the tool, then use it"]);
    assert_eq!(run.code, 0, "{:?}\n{}", run.lines, run.stderr);
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        !requests[0].body.to_string().contains("changing_unlocked"),
        "not offered before the server had it: {}",
        requests[0].body
    );
    assert!(
        requests[2]
            .body
            .to_string()
            .contains("the unlocked tool ran"),
        "the new tool was called: {}",
        requests[2].body
    );
}
