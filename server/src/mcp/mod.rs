//! MCP servers (Model Context Protocol) through `rmcp`: a local server as a child process on
//! stdio, a remote one over Streamable HTTP. This file connects, lists the tools and reports
//! each server's state (for `agent-lsp doctor`); `hub.rs` keeps a workspace's servers
//! running for the agent, `tool.rs` is one of their tools as the model sees it.

mod hub;
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

/// The innermost message of an error chain, without the Rust type names rmcp puts in
/// brackets (they say nothing to a user).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    static TYPES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\s*\[[A-Za-z_:<>, ]+\]").expect("a valid pattern")
    });
    TYPES.replace_all(&cause.to_string(), "").into_owned()
}

/// Starts (or reaches) `server` and lists its tools, within its timeout.
pub async fn connect(name: &str, server: &McpServer) -> Result<Connection, String> {
    let watch = Watch::default();
    let work = async {
        let service = match server {
            McpServer::Local {
                command,
                environment,
                ..
            } => {
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
                    .map_err(|e| root_cause(&e))?
            }
            McpServer::Remote { url, headers, .. } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                for (key, value) in headers {
                    let value = expand_env(value).map_err(|e| format!("header {key}: {e}"))?;
                    let key = key
                        .parse()
                        .map_err(|_| format!("bad header name {key:?}"))?;
                    let value = value
                        .parse()
                        .map_err(|_| "a header value is not valid".to_string())?;
                    config.custom_headers.insert(key, value);
                }
                let transport = StreamableHttpClientTransport::from_config(config);
                watch
                    .clone()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("{url}: {}", root_cause(&e)))?
            }
        };
        let tools = service
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list: {e}"))?;
        // What it said while starting is in this list.
        watch.tools_changed.store(false, Ordering::Relaxed);
        Ok(Connection {
            service,
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
