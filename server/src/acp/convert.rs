//! The agent's words in ACP's: updates as `session/update` payloads, a stored session as the
//! updates that replay it, how a turn ended as a stop reason, a prompt's content blocks as
//! text and context.

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, EmbeddedResourceResource, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionMode, SessionModeState, SessionUpdate, StopReason, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};
use std::path::Path;

use serde_json::Value;

use crate::editor::{ProposedChange, Update};
use crate::status::{PartKind, PartStatus, TurnEnd};
use crate::store::{SessionView, Todo};

/// Our modes as ACP session modes.
pub fn modes(current: &str) -> SessionModeState {
    let mode = |id: &str, name: &str, what: &str| {
        SessionMode::new(id.to_string(), name.to_string()).description(what.to_string())
    };
    SessionModeState::new(
        current.to_string(),
        vec![
            mode("build", "Build", "Asks before edits and commands"),
            mode(
                "plan",
                "Plan",
                "Read-only: looks and plans, changes nothing",
            ),
            mode(
                "auto",
                "Auto",
                "Edits and runs commands in the workspace without asking",
            ),
        ],
    )
}

pub fn stop_reason(end: TurnEnd) -> StopReason {
    match end {
        TurnEnd::EndTurn => StopReason::EndTurn,
        TurnEnd::MaxSteps => StopReason::MaxTurnRequests,
        TurnEnd::MaxTokens => StopReason::MaxTokens,
        TurnEnd::Refusal => StopReason::Refusal,
        TurnEnd::Cancelled => StopReason::Cancelled,
        // An error answers the prompt with a JSON-RPC error instead; this is the fallback.
        TurnEnd::Error => StopReason::EndTurn,
    }
}

/// What kind of work a tool does, for the client's icons and grouping.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "write" | "edit" | "apply_patch" => ToolKind::Edit,
        "glob" | "grep" | "recall" | "lsp" => ToolKind::Search,
        "bash" => ToolKind::Execute,
        "webfetch" => ToolKind::Fetch,
        "todowrite" | "todoread" | "context_checkpoint" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The one line that says what a call does: the tool and what it works on.
pub fn tool_title(name: &str, input: &Value) -> String {
    let subject = ["filePath", "path", "pattern", "command", "url", "query"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str));
    match subject {
        Some(s) => format!("{name} {}", s.lines().next().unwrap_or(s)),
        None => name.to_string(),
    }
}

/// The file a call works on, absolute (the client opens or follows it).
fn locations(input: &Value, root: &Path) -> Vec<ToolCallLocation> {
    ["filePath", "path"]
        .iter()
        .filter_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|p| ToolCallLocation::new(root.join(p)))
        .take(1)
        .collect()
}

fn status(s: PartStatus) -> ToolCallStatus {
    match s {
        PartStatus::Pending | PartStatus::Streaming => ToolCallStatus::Pending,
        PartStatus::Running => ToolCallStatus::InProgress,
        PartStatus::Completed => ToolCallStatus::Completed,
        PartStatus::Error | PartStatus::Interrupted => ToolCallStatus::Failed,
    }
}

pub fn tool_call(id: &str, name: &str, input: &Value, s: PartStatus, root: &Path) -> SessionUpdate {
    SessionUpdate::ToolCall(
        ToolCall::new(id.to_string(), tool_title(name, input))
            .kind(tool_kind(name))
            .status(status(s))
            .locations(locations(input, root))
            .raw_input(input.clone()),
    )
}

/// A call's result: its status, title, output and, for edits, the diff.
pub fn tool_result(
    id: &str,
    s: PartStatus,
    title: &str,
    output: &str,
    diff: Option<&ProposedChange>,
) -> SessionUpdate {
    let mut content = vec![ToolCallContent::from(ContentBlock::from(
        output.to_string(),
    ))];
    if let Some(d) = diff {
        content.push(
            Diff::new(d.path.clone(), d.new_text.clone())
                .old_text(d.old_text.clone())
                .into(),
        );
    }
    let mut fields = ToolCallUpdateFields::new()
        .status(status(s))
        .content(content);
    if !title.is_empty() {
        fields = fields.title(title.to_string());
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields))
}

pub fn plan(todos: &[Todo]) -> SessionUpdate {
    let entry = |t: &Todo| {
        let priority = match t.priority.as_str() {
            "high" => PlanEntryPriority::High,
            "low" => PlanEntryPriority::Low,
            _ => PlanEntryPriority::Medium,
        };
        let status = match t.status.as_str() {
            "in_progress" => PlanEntryStatus::InProgress,
            "completed" | "cancelled" => PlanEntryStatus::Completed,
            _ => PlanEntryStatus::Pending,
        };
        PlanEntry::new(t.content.clone(), priority, status)
    };
    SessionUpdate::Plan(Plan::new(todos.iter().map(entry).collect()))
}

pub fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.to_string()))
}

/// A live update as a `session/update` payload (with its session), or `None` for what ACP
/// has no place for (statuses, usage, the state file: the prompt's answer tells the end).
/// `root` is the session's workspace, for absolute locations.
pub fn live(update: &Update, root: &Path) -> Option<(String, SessionUpdate)> {
    Some(match update {
        Update::Text {
            session_id, text, ..
        } => (
            session_id.clone(),
            SessionUpdate::AgentMessageChunk(chunk(text)),
        ),
        Update::Reasoning {
            session_id, text, ..
        } => (
            session_id.clone(),
            SessionUpdate::AgentThoughtChunk(chunk(text)),
        ),
        Update::ToolCall {
            session_id,
            id,
            name,
            input,
            status,
        } => (
            session_id.clone(),
            tool_call(id, name, input, *status, root),
        ),
        Update::ToolResult {
            session_id,
            id,
            status,
            title,
            output,
            diff,
            ..
        } => (
            session_id.clone(),
            tool_result(id, *status, title, output, diff.as_ref()),
        ),
        Update::Plan { session_id, todos } => (session_id.clone(), plan(todos)),
        Update::Retry {
            session_id,
            attempt,
            wait_ms,
            reason,
        } => (
            session_id.clone(),
            SessionUpdate::AgentThoughtChunk(chunk(&format!(
                "(retry {attempt} in {wait_ms} ms: {reason})\n"
            ))),
        ),
        _ => return None,
    })
}

/// The updates that replay a stored session: each message's text, reasoning and tool calls
/// with their final state, and the todo list.
pub fn replay(view: &SessionView, root: &Path) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    for m in &view.messages {
        for p in &m.parts {
            let text = p.data["text"].as_str().unwrap_or_default();
            match p.kind {
                PartKind::Text if m.role == "user" => {
                    out.push(SessionUpdate::UserMessageChunk(chunk(text)))
                }
                PartKind::Text => out.push(SessionUpdate::AgentMessageChunk(chunk(text))),
                PartKind::Reasoning => out.push(SessionUpdate::AgentThoughtChunk(chunk(text))),
                PartKind::Tool => {
                    let id = p.data["callId"].as_str().unwrap_or(&p.part_id);
                    let name = p.data["name"].as_str().unwrap_or("tool");
                    let state = p.status.unwrap_or(PartStatus::Completed);
                    out.push(tool_call(id, name, &p.data["input"], state, root));
                    if let Some(output) = p.data["output"].as_str() {
                        let title = p.data["title"].as_str().unwrap_or_default();
                        out.push(tool_result(id, state, title, output, None));
                    }
                }
                _ => {}
            }
        }
    }
    if !view.todos.is_empty() {
        out.push(plan(&view.todos));
    }
    out
}

/// A prompt's blocks as the user's text and the context that goes beside it (resource links
/// and embedded resources: what the client attached).
pub fn prompt_text(blocks: &[ContentBlock]) -> (String, Option<String>) {
    let mut text = Vec::new();
    let mut context = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => text.push(t.text.clone()),
            ContentBlock::ResourceLink(link) => {
                context.push(format!("The user attached {} ({}).", link.name, link.uri))
            }
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => context.push(format!(
                    "The user attached {}:\n```\n{}\n```",
                    t.uri, t.text
                )),
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    context.push(format!("The user attached {} (binary, not shown).", b.uri))
                }
                _ => {}
            },
            _ => {
                context.push("The user attached an image or audio, which is not supported.".into())
            }
        }
    }
    let context = (!context.is_empty()).then(|| context.join("\n\n"));
    (text.join("\n"), context)
}

/// The MCP servers a client passes with a session, in our configuration's terms.
pub fn mcp_servers(
    servers: &[agent_client_protocol::v1::schema::McpServer],
) -> std::collections::BTreeMap<String, crate::config::McpServer> {
    use agent_client_protocol::v1::schema::McpServer as Acp;
    let mut out = std::collections::BTreeMap::new();
    for server in servers {
        let (name, ours) = match server {
            Acp::Stdio(s) => {
                let mut command = vec![s.command.to_string_lossy().into_owned()];
                command.extend(s.args.iter().cloned());
                let environment = s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect();
                let ours = crate::config::McpServer::Local {
                    command,
                    environment,
                    enabled: true,
                    timeout_ms: None,
                };
                (&s.name, ours)
            }
            // Our remote servers try Streamable HTTP, then HTTP+SSE: one entry serves both.
            Acp::Http(h) => (&h.name, remote(&h.url, &h.headers)),
            Acp::Sse(h) => (&h.name, remote(&h.url, &h.headers)),
            other => {
                tracing::warn!("MCP server {other:?} left out: an unknown transport");
                continue;
            }
        };
        out.insert(name.clone(), ours);
    }
    out
}

fn remote(
    url: &str,
    headers: &[agent_client_protocol::v1::schema::HttpHeader],
) -> crate::config::McpServer {
    crate::config::McpServer::Remote {
        url: url.to_string(),
        headers: (headers.iter())
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        enabled: true,
        timeout_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{
        HttpHeader, McpServer, McpServerHttp, McpServerSse, McpServerStdio,
    };

    use crate::config::McpServer as Ours;

    #[test]
    fn a_clients_mcp_servers_become_ours_whatever_their_transport() {
        let header = vec![HttpHeader::new("Authorization", "Bearer t")];
        let servers = super::mcp_servers(&[
            McpServer::Stdio(McpServerStdio::new("local", "node").args(vec!["s.js".into()])),
            McpServer::Http(McpServerHttp::new("new", "http://h/mcp").headers(header.clone())),
            McpServer::Sse(McpServerSse::new("old", "http://h/sse").headers(header)),
        ]);
        assert!(
            matches!(&servers["local"], Ours::Local { command, .. } if command == &["node", "s.js"])
        );
        for (name, address) in [("new", "http://h/mcp"), ("old", "http://h/sse")] {
            let Ours::Remote { url, headers, .. } = &servers[name] else {
                panic!("{name} is remote");
            };
            assert_eq!(url, address);
            assert_eq!(headers["Authorization"], "Bearer t");
        }
    }
}
