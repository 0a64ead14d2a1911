//! Compaction: when a session no longer fits the model's window, the messages before the
//! most recent turns are folded into a checkpoint the model writes from a fixed template
//! (goal, constraints, progress, decisions, next steps, critical context, files). Rolling:
//! the next compaction gets the previous checkpoint plus what came after it.
//!
//! Nothing is deleted: the log keeps every message (recall still finds them); the checkpoint
//! starts a new context epoch, with the baseline note printed afresh.

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Agent, AgentError, Result, baseline};
use crate::provider::{ChatMessage, ChatRequest, ProviderEvent};
use crate::status::{PartKind, PartStatus};
use crate::store::new_id;
use crate::store::{Event, MessageView};

/// How much of the end of the conversation stays verbatim by default, in tokens.
pub const KEEP_RECENT_TOKENS: u32 = 8_000;
/// Tool outputs longer than this (characters) reach the summariser as a stub.
pub(super) const STUB_OVER_CHARS: usize = 1_500;

const TEMPLATE: &str = "You write the checkpoint of a coding session: the conversation \
before it will be replaced by what you write, and the work continues from it alone. Distil, \
do not narrate. Keep exactly, character for character: file paths, commands, error messages, \
numbers, names and identifiers. When a previous checkpoint is given, merge it with the new \
material (keep what still holds, update what changed). Answer with exactly these sections:

## Goal
## Constraints and preferences
## Progress
### Done
### In progress
### Blocked
## Key decisions
## Next steps
## Critical context
(exact file paths, commands, error text, numbers)
## Relevant files";

/// The summariser's message: the checkpoint so far (if any) and a stretch of conversation.
fn summariser_input(previous: Option<&str>, conversation: &str) -> String {
    let mut text = String::new();
    if let Some(previous) = previous {
        text.push_str(&format!(
            "<previous-checkpoint>\n{}\n</previous-checkpoint>\n\n",
            previous.trim()
        ));
    }
    text.push_str(&format!(
        "<conversation>\n{conversation}</conversation>\n\nWrite the checkpoint now."
    ));
    text
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    pub folded_messages: usize,
    pub kept_messages: usize,
    pub summary: String,
}

/// A message as one line of the summariser's transcript; long tool outputs become a stub
/// that says what was lost and where it is.
fn render(m: &MessageView, out: &mut String) {
    for p in &m.parts {
        match p.kind {
            PartKind::Text => out.push_str(&format!(
                "[{}] {}\n",
                m.role,
                p.data["text"].as_str().unwrap_or_default().trim_end()
            )),
            PartKind::Tool => {
                let name = p.data["name"].as_str().unwrap_or("tool");
                let input = p.data["input"].as_str().unwrap_or("");
                let output = p.data["output"].as_str().unwrap_or("");
                let status = p.status.map_or("unknown", PartStatus::as_str);
                out.push_str(&format!("[tool {name} {input}] ({status}) "));
                if output.chars().count() > STUB_OVER_CHARS {
                    let whereabouts = format!("in message {} of the session log", m.message_id);
                    out.push_str(&stub(name, output, status == "completed", &whereabouts));
                } else {
                    out.push_str(output.trim_end());
                }
                out.push('\n');
            }
            _ => {}
        }
    }
}

/// The loss-annotated stand-in for a long tool output: what it was, how big, whether it
/// failed, its first lines and the files it names, and where the whole of it is.
pub(super) fn stub(tool: &str, output: &str, succeeded: bool, whereabouts: &str) -> String {
    let paths: Vec<String> = output
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "\"'`()[]{}<>,;:".contains(c)))
        .filter(|w| w.contains('/') && w.contains('.') && !w.contains("://") && w.len() < 200)
        .take(8)
        .map(String::from)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let head: String = output.lines().take(3).collect::<Vec<_>>().join(" | ");
    format!(
        "[output of {tool} not shown: {} characters, {}; first lines: {}{}; the full output is \
         {whereabouts}, and the recall tool finds it]",
        output.chars().count(),
        if succeeded { "succeeded" } else { "failed" },
        head.chars().take(200).collect::<String>(),
        if paths.is_empty() {
            String::new()
        } else {
            format!("; files named: {}", paths.join(", "))
        }
    )
}

/// Tokens a message takes (text and tool input/output).
fn message_tokens(m: &MessageView) -> u32 {
    m.parts
        .iter()
        .map(|p| match p.kind {
            PartKind::Text | PartKind::Note => {
                crate::tokens::count(p.data["text"].as_str().unwrap_or(""))
            }
            PartKind::Tool => {
                crate::tokens::count(p.data["input"].as_str().unwrap_or(""))
                    + crate::tokens::count(p.data["output"].as_str().unwrap_or(""))
            }
            _ => 0,
        } as u32)
        .sum()
}

/// Where the verbatim tail starts in `messages`: the earliest user message from which the
/// rest fits `keep` tokens — but never the first message (something must be folded), so at
/// most the last user message. `None` when there is nothing before the last user message.
fn tail_start(messages: &[MessageView], keep: u32) -> Option<usize> {
    let last_user = messages.iter().rposition(|m| m.role == "user")?;
    let mut best = last_user;
    let mut total = 0u32;
    for (i, m) in messages.iter().enumerate().rev() {
        total = total.saturating_add(message_tokens(m));
        if m.role == "user" && i < last_user {
            if total > keep {
                break;
            }
            best = i;
        }
    }
    if best == 0 {
        best = last_user;
    }
    (best > 0).then_some(best)
}

impl Agent {
    /// One summariser call: the template as system prompt, `text` as the message, no tools.
    async fn summarise(
        &self,
        provider: &dyn crate::provider::Provider,
        text: String,
        max_tokens: u32,
    ) -> Result<String> {
        let request = ChatRequest {
            model: self.model(),
            system: vec![TEMPLATE.into()],
            messages: vec![ChatMessage::User { text }],
            tools: Vec::new(),
            max_tokens,
        };
        let mut stream = provider
            .stream(&request)
            .await
            .map_err(|e| AgentError::refused(format!("compaction failed: {e}")))?;
        let mut summary = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(|e| AgentError::refused(format!("compaction failed: {e}")))? {
                ProviderEvent::TextDelta(t) => {
                    summary.push_str(&t);
                    if summary.len() > super::MAX_ANSWER_BYTES {
                        return Err(AgentError::refused(format!(
                            "compaction failed: the checkpoint passed {} MB",
                            super::MAX_ANSWER_BYTES / (1024 * 1024)
                        )));
                    }
                }
                ProviderEvent::Finish(_) => break,
                _ => {}
            }
        }
        Ok(summary)
    }

    /// The checkpoint of `folded` on top of `summary`. The summariser's window holds one
    /// chunk of the folded material at a time (with the template, the checkpoint so far and
    /// room for its answer): chunks are folded in turn, each into the checkpoint of the ones
    /// before.
    async fn fold(
        &self,
        provider: &dyn crate::provider::Provider,
        mut summary: Option<String>,
        folded: &[MessageView],
    ) -> Result<Option<String>> {
        let limits = self.limits();
        let max_tokens = limits.max_output_tokens.min(8_192);
        let room = (limits.usable_input() as usize)
            .saturating_sub(crate::tokens::count(TEMPLATE) + max_tokens as usize + 512)
            .max(1_024);
        let mut chunk = String::new();
        let mut chunk_tokens = 0;
        for (i, m) in folded.iter().enumerate() {
            let mut piece = String::new();
            render(m, &mut piece);
            chunk_tokens += crate::tokens::count(&piece);
            chunk.push_str(&piece);
            let last = i + 1 == folded.len();
            let budget = room.saturating_sub(summary.as_deref().map_or(0, crate::tokens::count));
            if last || chunk_tokens >= budget.max(512) {
                let text = summariser_input(summary.as_deref(), &std::mem::take(&mut chunk));
                chunk_tokens = 0;
                summary = Some(self.summarise(provider, text, max_tokens).await?);
            }
        }
        Ok(summary)
    }

    /// Folds everything before the most recent turns into a checkpoint written by the model,
    /// and starts a new context epoch with it.
    pub async fn compact(&self, sid: &str) -> Result<Compacted> {
        let provider = self.provider.clone().ok_or_else(|| {
            AgentError::NoModel(
                "no model provider is configured: compaction needs the model".into(),
            )
        })?;
        let (view, epoch) = {
            let store = self.store.lock().unwrap_or_else(|p| p.into_inner());
            let view = store
                .session(sid)?
                .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
            (view, store.latest_epoch(sid)?)
        };
        // The messages of the current epoch: after the previous checkpoint's cut.
        let from = epoch
            .as_ref()
            .and_then(|e| e.first_kept.as_ref())
            .and_then(|id| view.messages.iter().position(|m| &m.message_id == id))
            .unwrap_or(0);
        let current = &view.messages[from..];
        let keep = self
            .config
            .compact_keep_tokens
            .unwrap_or(KEEP_RECENT_TOKENS);
        let cut = tail_start(current, keep).ok_or_else(|| {
            AgentError::refused("nothing to compact yet: the conversation is one turn long")
        })?;
        let (folded, kept) = current.split_at(cut);

        let previous = epoch.as_ref().and_then(|e| e.summary.clone());
        let summary = self.fold(provider.as_ref(), previous, folded).await?;
        let summary = summary.unwrap_or_default();
        if summary.trim().is_empty() {
            return Err(AgentError::refused(
                "compaction failed: the model wrote an empty checkpoint",
            ));
        }
        // A new epoch: the baseline printed afresh, the checkpoint, and the kept tail.
        let (baseline_text, record) =
            baseline::build(&self.workspace, &crate::tools::skill_list(&self.workspace))?;
        self.append(
            sid,
            vec![Event::ContextEpochStarted {
                epoch_id: new_id(),
                baseline: baseline_text,
                change_record: record,
                snapshot: None,
                summary: Some(summary.clone()),
                first_kept: Some(kept[0].message_id.clone()),
            }],
        )?;
        tracing::info!(
            session = %sid,
            folded = folded.len(),
            kept = kept.len(),
            "compacted"
        );
        Ok(Compacted {
            folded_messages: folded.len(),
            kept_messages: kept.len(),
            summary,
        })
    }
}

/// The JSON form of a compaction for the CLI and the protocol.
pub fn to_json(c: &Compacted) -> Value {
    json!({"foldedMessages": c.folded_messages, "keptMessages": c.kept_messages, "summary": c.summary})
}
