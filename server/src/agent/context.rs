//! The request of each step: the mode's system prompt and the baseline note (the stable
//! prefix), then the session's messages as stored, then the tools.

use super::Agent;
use crate::provider::{ChatMessage, ChatRequest, ToolCallMsg};
use crate::store::MessageView;
use crate::tools::ToolContext;

const WRAP_UP: &str = "You have reached the step limit for this turn. Do not call any tools. \
Summarise what you did, what is left to do, and anything the user should check.";

fn texts(m: &MessageView, kinds: &[&str]) -> String {
    m.parts
        .iter()
        .filter(|p| kinds.contains(&p.kind.as_str()))
        .filter_map(|p| p.data["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The stored messages as the model sees them.
pub fn project_messages(messages: &[MessageView]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for m in messages {
        match m.role.as_str() {
            "user" => out.push(ChatMessage::User {
                text: texts(m, &["note", "text"]),
            }),
            "assistant" => {
                let text = texts(m, &["text"]);
                let reasoning = m.parts.iter().find(|p| p.kind == "reasoning").map(|p| {
                    (
                        p.data["text"].as_str().unwrap_or_default().to_string(),
                        p.data["signature"].as_str().map(String::from),
                    )
                });
                let tools: Vec<_> = m.parts.iter().filter(|p| p.kind == "tool").collect();
                let calls: Vec<ToolCallMsg> = tools
                    .iter()
                    .map(|p| ToolCallMsg {
                        id: p.data["callId"].as_str().unwrap_or_default().into(),
                        name: p.data["name"].as_str().unwrap_or_default().into(),
                        arguments: p.data["input"].as_str().unwrap_or("{}").into(),
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    continue; // an answer that failed before any output
                }
                out.push(ChatMessage::Assistant {
                    text,
                    reasoning,
                    tool_calls: calls,
                });
                for p in tools {
                    out.push(ChatMessage::ToolResult {
                        call_id: p.data["callId"].as_str().unwrap_or_default().into(),
                        name: p.data["name"].as_str().unwrap_or_default().into(),
                        content: p.data["output"].as_str().unwrap_or("(no output)").into(),
                        is_error: p.status.as_deref() != Some("completed"),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

pub fn build_request(
    agent: &Agent,
    sid: &str,
    ctx: &ToolContext,
    last_step: bool,
) -> Result<ChatRequest, String> {
    let (view, epoch) = {
        let store = agent.store.lock().unwrap_or_else(|p| p.into_inner());
        let view = store
            .session(sid)
            .map_err(|e| e.to_string())?
            .ok_or("the session vanished")?;
        let epoch = store.latest_epoch(sid).map_err(|e| e.to_string())?;
        (view, epoch)
    };
    let mode = view
        .summary
        .mode
        .clone()
        .unwrap_or_else(|| agent.config.mode.clone());
    let mut system = vec![super::prompts::system(&mode)];
    if let Some((_, baseline, _)) = epoch {
        system.push(baseline);
    }
    let mut messages = project_messages(&view.messages);
    let tools = if last_step {
        messages.push(ChatMessage::User {
            text: WRAP_UP.into(),
        });
        Vec::new()
    } else {
        agent.registry.definitions(ctx)
    };
    Ok(ChatRequest {
        model: agent.model(),
        system,
        messages,
        tools,
        max_tokens: agent.limits().max_output_tokens,
    })
}
