//! Server-sent events from a streaming HTTP answer (framing by `eventsource-stream`).

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};

use super::ProviderError;

/// One SSE event: its `event:` name (empty when absent) and its `data:`.
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

pub fn events(
    resp: reqwest::Response,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send {
    resp.bytes_stream().eventsource().map(|item| {
        item.map(|e| SseEvent {
            event: e.event,
            data: e.data,
        })
        .map_err(|e| ProviderError::StreamBroken {
            message: e.to_string(),
        })
    })
}
