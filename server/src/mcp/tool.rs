//! One MCP server's tool as the model sees it: `SERVER_TOOL` with the server's input schema,
//! asked for like every tool (permission key: its full name; default ask, `auto` allows),
//! its result as text.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::Value;

use super::hub::{Hub, tool_name};
use crate::editor::PermissionRequest;
use crate::permission::Mode;
use crate::tools::{Need, Prepared, Tool, ToolContext, ToolError, ToolOutput};

pub struct McpTool {
    hub: Arc<Hub>,
    server: String,
    tool: String,
    name: String,
    description: String,
    schema: Value,
    /// The server says the tool changes nothing (`readOnlyHint`).
    read_only: bool,
}

impl McpTool {
    pub fn new(hub: Arc<Hub>, server: &str, tool: &rmcp::model::Tool) -> Self {
        let about = tool.description.as_deref().unwrap_or("");
        Self {
            hub,
            server: server.to_string(),
            tool: tool.name.to_string(),
            name: tool_name(server, &tool.name),
            description: format!("(From the MCP server {server}.) {about}"),
            schema: Value::Object((*tool.input_schema).clone()),
            read_only: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        }
    }
}

/// A tool's result for the model: its text, images and other binary content by type and
/// size, embedded resources with their text, structured content as JSON.
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        let size = |data: &Value| data.as_str().map_or(0, |d| d.len() * 3 / 4);
        let part = match v["type"].as_str() {
            Some("text") => v["text"].as_str().unwrap_or_default().to_string(),
            Some(kind @ ("image" | "audio")) => format!(
                "[{kind}: {}, {} bytes]",
                v["mimeType"].as_str().unwrap_or("unknown type"),
                size(&v["data"])
            ),
            Some("resource") => {
                let r = &v["resource"];
                let uri = r["uri"].as_str().unwrap_or("?");
                match r["text"].as_str() {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!("[resource {uri}: {} bytes]", size(&r["blob"])),
                }
            }
            Some("resource_link") => format!("[link {}]", v["uri"].as_str().unwrap_or("?")),
            _ => v.to_string(),
        };
        parts.push(part);
    }
    if let Some(structured) = &result.structured_content {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    /// A server may write files (a filesystem server does): the step's snapshot then scans.
    fn changes_unreported_files(&self) -> bool {
        !self.read_only
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn offered(&self, _: &ToolContext) -> bool {
        true
    }

    fn description(&self, _: &ToolContext) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn prepare_value(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let Value::Object(arguments) = args else {
            return Err(ToolError::new(format!(
                "the arguments for {} must be a JSON object",
                self.name
            )));
        };
        if ctx.policy.mode == Mode::Plan && !self.read_only {
            return Err(ToolError::new(format!(
                "plan mode is read-only, and {} may change things (its server does not say \
                 it is read-only)",
                self.name
            )));
        }
        let request = PermissionRequest {
            permission: self.name.clone(),
            tool: self.name.clone(),
            title: format!("MCP server {}: {}", self.server, self.tool),
            patterns: vec!["*".into()],
            always: vec!["*".into()],
            ..Default::default()
        };
        let (hub, server, tool) = (self.hub.clone(), self.server.clone(), self.tool.clone());
        let title = format!("{server} {tool}");
        Ok(Prepared::new(vec![Need { request }], move |_| {
            Box::pin(async move {
                let result = hub
                    .call(&server, &tool, arguments)
                    .await
                    .map_err(ToolError::new)?;
                let text = result_text(&result);
                if result.is_error == Some(true) {
                    return Err(ToolError::new(format!("{server} {tool} failed: {text}")));
                }
                Ok(ToolOutput {
                    title,
                    output: text,
                    ..Default::default()
                })
            })
        }))
    }
}
