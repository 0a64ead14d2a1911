//! The `scripted` provider: replays a model script in process (the offline demo, quick tests).
//! The same script drives `fake-llm`, which tests the real HTTP clients.

use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use super::script::{Reply, Script};
use super::{ChatRequest, EventStream, Provider, ProviderError, ProviderEvent, StopReason, Usage};

pub struct Scripted {
    script: Script,
    next: Mutex<usize>,
}

impl Scripted {
    pub fn new(script: Script) -> Self {
        Self {
            script,
            next: Mutex::new(0),
        }
    }
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn events(reply: &Reply, size: usize) -> Vec<ProviderEvent> {
    let mut out = Vec::new();
    if let Some(r) = &reply.reasoning {
        out.extend(
            chunks(r, size)
                .into_iter()
                .map(ProviderEvent::ReasoningDelta),
        );
    }
    out.extend(
        chunks(&reply.text, size)
            .into_iter()
            .map(ProviderEvent::TextDelta),
    );
    for (index, call) in reply.tool_calls.iter().enumerate() {
        out.push(ProviderEvent::ToolCallStart {
            index,
            id: call
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{}", crate::store::new_id())),
            name: call.name.clone(),
        });
        out.extend(
            chunks(&call.arguments_text(), size)
                .into_iter()
                .map(|arguments| ProviderEvent::ToolCallDelta { index, arguments }),
        );
        out.push(ProviderEvent::ToolCallEnd { index });
    }
    if let Some(u) = reply.usage {
        out.push(ProviderEvent::Usage(Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
        }));
    }
    out.push(ProviderEvent::Finish(
        match reply.finish_reason.as_deref() {
            Some("length" | "max_tokens") => StopReason::MaxTokens,
            Some("refusal" | "content_filter") => StopReason::Refusal,
            _ if !reply.tool_calls.is_empty() => StopReason::ToolUse,
            _ => StopReason::EndTurn,
        },
    ));
    out
}

impl Provider for Scripted {
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            let body = super::openai::request_body(request, super::openai::LimitField::MaxTokens);
            let turn = match self.script.side_turn(&body) {
                Some((_, side)) => Some(side.clone()),
                None => {
                    let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
                    let turn = self.script.turns.get(*next).cloned();
                    *next += 1;
                    turn
                }
            };
            let Some(turn) = turn else {
                return Err(ProviderError::Other {
                    message: "the model script is exhausted".into(),
                });
            };
            if let Some(reason) = turn.expect.as_ref().and_then(|e| e.check(&body)) {
                return Err(ProviderError::Other {
                    message: format!("script expectation failed: {reason}"),
                });
            }
            let fault = turn.fault.clone().unwrap_or_default();
            if let Some(ms) = fault.delay_ms {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if fault.context_overflow {
                return Err(ProviderError::ContextOverflow {
                    message: "the scripted model's context is full".into(),
                    window: None,
                });
            }
            if let Some(status) = fault.status {
                let after = fault
                    .retry_after_ms
                    .map(Duration::from_millis)
                    .or(fault.retry_after_s.map(Duration::from_secs));
                let body = fault
                    .body_json
                    .as_ref()
                    .map(|v| v.to_string())
                    .or(fault.body.clone())
                    .unwrap_or_else(|| "scripted fault".into());
                return Err(super::classify(status, &body, after, None));
            }
            if let Some(path) = &turn.replay {
                let captured = std::fs::read(path).map_err(|e| ProviderError::Other {
                    message: format!("cannot read the replay {}: {e}", path.display()),
                })?;
                return Ok(super::openai::replay(captured));
            }
            let reply = turn.reply.clone().unwrap_or_else(|| Reply {
                text: "This answer is cut off in the middle of a sentence because".into(),
                ..Default::default()
            });
            let mut items: Vec<Result<ProviderEvent, ProviderError>> =
                events(&reply, self.script.chunk_chars.unwrap_or(8))
                    .into_iter()
                    .map(Ok)
                    .collect();
            if let Some(n) = fault
                .disconnect_after_chunks
                .or(fault.stream_error_after_chunks)
            {
                items.truncate(n);
                items.push(Err(ProviderError::StreamBroken {
                    message: "the scripted stream was cut".into(),
                }));
            }
            let delay = Duration::from_millis(self.script.chunk_delay_ms);
            Ok(futures::stream::iter(items)
                .then(move |item| async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    item
                })
                .boxed())
        })
    }
}
