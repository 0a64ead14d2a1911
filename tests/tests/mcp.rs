//! MCP servers with real servers from npm (`tests/mcp-servers`, installed by scripts/test):
//! `@modelcontextprotocol/server-everything` over stdio and over Streamable HTTP, a server
//! that does not exist, a disabled one and a header whose variable is missing, as
//! `agent-lsp doctor --json` reports them; and no server process outlives the check.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_lsp_tests::process::{TestEnv, repo_root};
use serde_json::Value;

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

/// server-everything in its Streamable HTTP mode, killed when dropped.
struct HttpServer(Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_server(port: u16) -> HttpServer {
    let child = Command::new("node")
        .arg(everything())
        .arg("streamableHttp")
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

#[test]
fn doctor_reports_each_mcp_server_from_real_servers() {
    let port = free_port();
    let _http = http_server(port);
    let env = TestEnv::new();
    let marker = format!("AGENT_LSP_MCP_TEST={}", std::process::id());
    let (key, value) = marker.split_once('=').unwrap();
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        format!(
            r#"
[mcp.everything]
type = "local"
command = ["node", "{everything}", "stdio"]
environment = {{ {key} = "{value}" }}

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
"#,
            everything = everything().display()
        ),
    )
    .unwrap();
    let (code, out, err) = env.run(&[
        "doctor",
        "--json",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "two servers fail, so doctor does: {out}\n{err}");
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
    let started = Instant::now();
    while !processes_with(&marker).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "an MCP server outlived doctor: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
