//! The older MCP transport, HTTP+SSE (protocol version 2024-11-05), for remote servers that do
//! not speak Streamable HTTP. A GET opens an event stream whose first `endpoint` event names
//! the URL to POST messages to; the server's messages arrive on the stream as `message`
//! events. rmcp 3 has no client for it, so this is one, as an rmcp `Transport`.

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use crate::provider::sse::decode;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("HTTP {0}")]
    Status(reqwest::StatusCode),
    #[error("the answer is not an event stream (content type {0:?})")]
    NotEventStream(String),
    #[error("the event stream ended before it named the endpoint to post to")]
    NoEndpoint,
    #[error("the endpoint {0:?} is not a URL")]
    BadEndpoint(String),
    #[error("the endpoint {0} is on another origin than the event stream")]
    OtherOrigin(String),
    #[error("{0}")]
    Stream(String),
}

/// A connected HTTP+SSE session: the stream is read by a task into `incoming`.
pub struct SseTransport {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl SseError {
    /// Why nothing answered at the address (refused, unknown host, timed out), if that is the
    /// failure.
    pub fn unreachable(&self) -> Option<String> {
        let Self::Http(e) = self else { return None };
        (e.is_connect() || e.is_timeout()).then(|| super::root_cause(e))
    }
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the endpoint it names.
    pub async fn connect(url: &str, headers: HeaderMap) -> Result<Self, SseError> {
        let base = reqwest::Url::parse(url).map_err(|_| SseError::BadEndpoint(url.into()))?;
        let http = reqwest::Client::new();
        let response = (http.get(base.clone()).headers(headers.clone()))
            .header(ACCEPT, "text/event-stream")
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(SseError::Status(response.status()));
        }
        let content_type = (response.headers().get(CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if !content_type.starts_with("text/event-stream") {
            return Err(SseError::NotEventStream(content_type));
        }
        let mut events = Box::pin(decode(response.bytes_stream()));
        let endpoint = loop {
            match events.next().await {
                Some(Ok(e)) if e.event == "endpoint" => {
                    let data = e.data.trim();
                    break base
                        .join(data)
                        .map_err(|_| SseError::BadEndpoint(data.into()))?;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(SseError::Stream(e.to_string())),
                None => return Err(SseError::NoEndpoint),
            }
        };
        // The headers (a token, often) go to every POST: only to where the stream came from.
        if endpoint.origin() != base.origin() {
            return Err(SseError::OtherOrigin(endpoint.to_string()));
        }
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let e = match event {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::debug!("MCP event stream ended: {e}");
                        break;
                    }
                };
                if !matches!(e.event.as_str(), "" | "message") {
                    continue;
                }
                match serde_json::from_str(&e.data) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        tracing::warn!("MCP server sent a message that is not JSON-RPC: {err}")
                    }
                }
            }
        });
        Ok(Self {
            http,
            endpoint,
            headers,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = (self.http.post(self.endpoint.clone()))
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let response = request.send().await?;
            if !response.status().is_success() {
                return Err(SseError::Status(response.status()));
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An address that answers one GET with an event stream naming `endpoint`.
    async fn stream_naming(endpoint: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let body = format!("event: endpoint\ndata: {endpoint}\n\n");
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            socket.write_all(body.as_bytes()).await.unwrap();
            // Held open, as an event stream is.
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        });
        format!("http://{address}/sse")
    }

    #[tokio::test]
    async fn the_endpoint_must_be_where_the_stream_came_from() {
        let url = stream_naming("https://elsewhere.example/messages").await;
        let e = SseTransport::connect(&url, HeaderMap::new()).await.err();
        assert!(matches!(e, Some(SseError::OtherOrigin(_))), "{e:?}");

        let url = stream_naming("/messages?sessionId=1").await;
        let transport = SseTransport::connect(&url, HeaderMap::new()).await.unwrap();
        assert_eq!(
            transport.endpoint.as_str(),
            url.replace("/sse", "/messages?sessionId=1")
        );
    }
}
