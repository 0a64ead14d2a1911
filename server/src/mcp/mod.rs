//! MCP servers (Model Context Protocol) through `rmcp`: a local server as a child process on
//! stdio, a remote one over Streamable HTTP (or the older HTTP+SSE, `sse.rs`). This file connects, lists the tools and reports
//! each server's state (for `agent-lsp doctor`); `hub.rs` keeps a workspace's servers
//! running for the agent, `tool.rs` is one of their tools as the model sees it.

mod hub;
mod sse;
mod tool;

pub use hub::Hub;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::Tool;
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde::Serialize;
use tokio::io::AsyncBufReadExt;

use crate::config::McpServer;

/// The client side's handler: notes `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct Watch {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Watch {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::Relaxed);
    }
}

/// A running MCP server and its tools (listed again after it says they changed).
pub struct Connection {
    pub service: RunningService<RoleClient, Watch>,
    /// `stdio`, `http` (Streamable HTTP) or `sse` (the older HTTP+SSE).
    pub transport: &'static str,
    tools: std::sync::Mutex<Vec<Tool>>,
    watch: Watch,
}

impl Connection {
    pub fn tools(&self) -> Vec<Tool> {
        self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Lists the tools again if the server said they changed.
    pub async fn relist_if_changed(&self, name: &str) {
        if !self.watch.tools_changed.swap(false, Ordering::Relaxed) {
            return;
        }
        match self.service.list_all_tools().await {
            Ok(tools) => *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools,
            Err(e) => tracing::warn!(server = %name, "tools/list after a change: {e}"),
        }
    }

    /// Ends the session; a local server's process goes with it.
    pub async fn close(self) {
        if let Err(e) = self.service.cancel().await {
            tracing::debug!("closing an MCP server: {e}");
        }
    }
}

/// `{env:NAME}` in `text` replaced by that variable; a missing one is an error (secrets come
/// from the environment only).
pub fn expand_env(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{env:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 5..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed {{env:…}} in {text:?}"))?;
        let name = &after[..end];
        let value = std::env::var(name).map_err(|_| format!("${name} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The innermost message of an error chain.
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// An rmcp error as a user reads it: its innermost message without the Rust type names in
/// brackets and the layers' prefixes ("Send message error Transport error: Client error: …"),
/// which say nothing to a user.
fn rmcp_reason(e: &(dyn std::error::Error + 'static)) -> String {
    static TYPES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\s*\[[A-Za-z_:<>, ]+\]").expect("a valid pattern")
    });
    static LAYERS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^(Send message error |Transport error: |Client error: )+")
            .expect("a valid pattern")
    });
    let text = root_cause(e).replace(", when send initialize request", " to initialize");
    let text = TYPES.replace_all(&text, "");
    LAYERS.replace(text.trim(), "").into_owned()
}

/// Starts (or reaches) `server` and lists its tools, within its timeout.
pub async fn connect(name: &str, server: &McpServer) -> Result<Connection, String> {
    let watch = Watch::default();
    let work = async {
        let (service, transport) = match server {
            McpServer::Local {
                command,
                environment,
                ..
            } => (
                start_local(name, command, environment, &watch).await?,
                "stdio",
            ),
            McpServer::Remote { url, headers, .. } => reach_remote(url, headers, &watch).await?,
        };
        let tools = service
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list: {e}"))?;
        // What it said while starting is in this list.
        watch.tools_changed.store(false, Ordering::Relaxed);
        Ok(Connection {
            service,
            transport,
            tools: std::sync::Mutex::new(tools),
            watch: watch.clone(),
        })
    };
    match tokio::time::timeout(server.timeout(), work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "did not answer within {} ms",
            server.timeout().as_millis()
        )),
    }
}

type Service = RunningService<RoleClient, Watch>;

/// A local server: its process, on stdio, its stderr to the debug log.
async fn start_local(
    name: &str,
    command: &[String],
    environment: &BTreeMap<String, String>,
    watch: &Watch,
) -> Result<Service, String> {
    let (program, args) = command.split_first().ok_or("no command")?;
    let cmd = tokio::process::Command::new(program).configure(|c| {
        c.args(args).envs(environment);
    });
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    if let Some(stderr) = stderr {
        let name = name.to_string();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %name, "{line}");
            }
        });
    }
    watch
        .clone()
        .serve(transport)
        .await
        .map_err(|e| rmcp_reason(&e))
}

/// A remote server over Streamable HTTP or, when that fails, the older HTTP+SSE (as the MCP
/// specification's backwards compatibility asks); the failure told is Streamable HTTP's.
async fn reach_remote(
    url: &str,
    headers: &BTreeMap<String, String>,
    watch: &Watch,
) -> Result<(Service, &'static str), String> {
    let mut header_map = reqwest::header::HeaderMap::new();
    for (key, value) in headers {
        let value = expand_env(value).map_err(|e| format!("header {key}: {e}"))?;
        let key: reqwest::header::HeaderName = key
            .parse()
            .map_err(|_| format!("bad header name {key:?}"))?;
        let value = value
            .parse()
            .map_err(|_| format!("the value of header {key} is not valid"))?;
        header_map.insert(key, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.custom_headers = (header_map.iter())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let streamable = match watch
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
    {
        Ok(service) => return Ok((service, "http")),
        Err(e) => rmcp_reason(&e),
    };
    let sse = match sse::SseTransport::connect(url, header_map).await {
        Ok(transport) => watch
            .clone()
            .serve(transport)
            .await
            .map_err(|e| rmcp_reason(&e)),
        Err(e) => match e.unreachable() {
            Some(why) => return Err(format!("cannot reach {url}: {why}")),
            None => Err(e.to_string()),
        },
    };
    sse.map(|service| (service, "sse")).map_err(|why| {
        format!("{url} answers neither Streamable HTTP ({streamable}) nor HTTP+SSE ({why})")
    })
}

/// A server's state, as doctor and `agent/config` report it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub name: String,
    pub transport: &'static str,
    /// `running`, `failed` or `disabled`; for the agent's servers also `not_started` and
    /// `starting`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tools: usize,
}

impl Report {
    fn new(name: &str, server: &McpServer, state: &'static str) -> Self {
        Self {
            name: name.to_string(),
            transport: server.transport(),
            state,
            reason: None,
            tools: 0,
        }
    }
}

/// The configured servers' states without starting any: from the agent's hub when there is
/// one, else `not_started` (or `disabled`).
pub fn states(servers: &BTreeMap<String, McpServer>, hub: Option<&Hub>) -> Vec<Report> {
    let live = hub.map(Hub::states).unwrap_or_default();
    servers
        .iter()
        .map(|(name, server)| {
            live.iter()
                .find(|r| &r.name == name)
                .cloned()
                .unwrap_or_else(|| {
                    let state = if server.enabled() {
                        "not_started"
                    } else {
                        "disabled"
                    };
                    Report::new(name, server, state)
                })
        })
        .collect()
}

/// Every configured server started (in parallel), its tools counted, and stopped again.
pub async fn check_all(servers: &BTreeMap<String, McpServer>) -> Vec<Report> {
    let checks = servers.iter().map(|(name, server)| async move {
        let mut report = Report::new(name, server, "disabled");
        if !server.enabled() {
            return report;
        }
        match connect(name, server).await {
            Ok(connection) => {
                report.state = "running";
                report.transport = connection.transport;
                report.tools = connection.tools().len();
                connection.close().await;
            }
            Err(why) => {
                report.state = "failed";
                report.reason = Some(why);
            }
        }
        report
    });
    futures::future::join_all(checks).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_references_are_replaced_and_a_missing_one_is_named() {
        // SAFETY: this test alone reads and writes this variable.
        unsafe { std::env::set_var("AGENT_LSP_TEST_MCP_TOKEN", "s3cret") };
        assert_eq!(
            expand_env("Bearer {env:AGENT_LSP_TEST_MCP_TOKEN}").unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(expand_env("plain").unwrap(), "plain");
        assert_eq!(
            expand_env("{env:AGENT_LSP_TEST_NO_SUCH_VAR}").unwrap_err(),
            "$AGENT_LSP_TEST_NO_SUCH_VAR is not set"
        );
        assert!(expand_env("{env:OPEN").is_err());
    }
}
