//! A workspace's MCP servers for the agent: started on first use (all at once, in
//! parallel), their tools offered as `SERVER_TOOL`, calls routed to them. A server that
//! fails to start, times out or dies is reported once and started again on the next use;
//! the session goes on without its tools meanwhile.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult};

use super::tool::McpTool;
use super::{Connection, connect};
use crate::config::McpServer;
use crate::tools::Tool;

pub struct Hub {
    servers: BTreeMap<String, McpServer>,
    running: tokio::sync::Mutex<BTreeMap<String, Arc<Connection>>>,
    /// Servers whose failure has been reported (once each, until one start works), with why.
    reported: Mutex<HashMap<String, String>>,
}

/// The model's name of a server's tool: `SERVER_TOOL`, characters outside
/// `[A-Za-z0-9_-]` replaced by `_`, cut to 64.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

impl Hub {
    /// The hub for the enabled servers of `servers`, or `None` when there are none.
    pub fn new(servers: &BTreeMap<String, McpServer>) -> Option<Arc<Self>> {
        let servers: BTreeMap<_, _> = servers
            .iter()
            .filter(|(_, s)| s.enabled())
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        (!servers.is_empty()).then(|| {
            Arc::new(Self {
                servers,
                running: tokio::sync::Mutex::default(),
                reported: Mutex::default(),
            })
        })
    }

    /// Every server running (those not yet started, or that died, are started now, in
    /// parallel), with their tools as the model's tools; and the failures not reported
    /// before (each server's once, until it starts), for the user.
    pub async fn tools(self: &Arc<Self>) -> (Vec<Box<dyn Tool>>, Vec<String>) {
        let mut news = Vec::new();
        let mut running = self.running.lock().await;
        running.retain(|_, c| !c.service.is_closed());
        let missing: Vec<_> = (self.servers.iter())
            .filter(|(n, _)| !running.contains_key(*n))
            .collect();
        let started = futures::future::join_all(
            missing
                .iter()
                .map(|(name, server)| async move { (*name, connect(name, server).await) }),
        )
        .await;
        for (name, result) in started {
            match result {
                Ok(connection) => {
                    self.reported_lock().remove(name);
                    running.insert(name.clone(), Arc::new(connection));
                }
                Err(why) => news.extend(self.report_once(name, &why)),
            }
        }
        let mut tools: Vec<Box<dyn Tool>> = Vec::new();
        for (name, connection) in running.iter() {
            connection.relist_if_changed(name).await;
            for t in &connection.tools() {
                tools.push(Box::new(McpTool::new(self.clone(), name, t)));
            }
        }
        (tools, news)
    }

    fn reported_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.reported.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The message for a server's failure, the first time (logged too).
    fn report_once(&self, name: &str, why: &str) -> Option<String> {
        if self
            .reported_lock()
            .insert(name.to_string(), why.to_string())
            .is_some()
        {
            return None;
        }
        let message = format!(
            "MCP server {name} is unavailable: {why}; its tools are left out until it starts"
        );
        tracing::warn!("{message}");
        Some(message)
    }

    /// Each server's state now, without starting any: running (with its tools), failed (with
    /// why), `starting` while a start is under way, else `not_started`.
    pub fn states(&self) -> Vec<super::Report> {
        let running = self.running.try_lock().ok();
        let failed = self.reported_lock().clone();
        (self.servers.iter())
            .map(|(name, server)| {
                let mut report = super::Report::new(name, server, "not_started");
                match running.as_ref().map(|r| r.get(name)) {
                    None => report.state = "starting",
                    Some(Some(c)) => {
                        report.state = "running";
                        report.transport = c.transport;
                        report.tools = c.tools().len();
                    }
                    Some(None) => {
                        if let Some(why) = failed.get(name) {
                            report.state = "failed";
                            report.reason = Some(why.clone());
                        }
                    }
                }
                report
            })
            .collect()
    }

    /// Calls `tool` of `server`; a server that is gone answers an error and is started again
    /// on the next use.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, String> {
        let connection = self.running.lock().await.get(server).cloned();
        let Some(connection) = connection else {
            return Err(format!(
                "the MCP server {server} is not running; try again later"
            ));
        };
        let timeout = self
            .servers
            .get(server)
            .map(McpServer::timeout)
            .unwrap_or_default();
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        match tokio::time::timeout(timeout, connection.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => {
                let gone = matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                );
                if gone || connection.service.is_closed() {
                    self.running.lock().await.remove(server);
                    let _ = self.report_once(server, &format!("it stopped during a call ({e})"));
                    return Err(format!(
                        "the MCP server {server} stopped during the call ({e}); it is started again on the next use"
                    ));
                }
                Err(format!("{server}: {e}"))
            }
            Err(_) => Err(format!(
                "{server} did not answer within {} ms",
                timeout.as_millis()
            )),
        }
    }
}
