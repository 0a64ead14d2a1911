//! The stdio transport in front of tower-lsp-server.
//!
//! tower-lsp-server stops reading its input at the first framing or JSON error (tokio-util's
//! `FramedRead` ends the stream after an error), which would let one bad message end the
//! server. So input is framed here first: malformed headers, a wrong `Content-Length`, invalid
//! JSON and bodies that are not JSON-RPC messages are answered with a JSON-RPC error and
//! dropped; only well-formed messages reach tower-lsp-server. Output passes through one writer
//! that emits whole frames, so those error replies never interleave with the server's own.

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tower_lsp_server::jsonrpc::{Request, Response};

/// Bodies larger than this are refused (and skipped) rather than buffered.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// Header bytes tolerated without a terminating blank line before they are thrown away.
const MAX_HEADER: usize = 8 * 1024;

/// One step of the input framer.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A well-formed JSON-RPC message body.
    Message(Vec<u8>),
    /// A problem to answer with an error response (`id` when it could be read).
    Error {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Incremental LSP framer over a byte buffer that never gives up on its input.
#[derive(Default)]
pub struct Framer {
    buf: Vec<u8>,
    /// How much of the pending body has been searched for a header already: a big body
    /// arrives in many reads, and searching it all again on each would be quadratic.
    scanned: usize,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The start of a header block (`Content-Length: <digits>\r\n`) inside `bytes`. Raw CR/LF can
/// never appear inside a JSON string, so this pattern is never part of a valid JSON body: where
/// it appears inside a declared body, the declared length was wrong.
fn next_header(bytes: &[u8]) -> Option<usize> {
    const PATTERN: &[u8] = b"Content-Length:";
    let mut from = 0;
    while let Some(i) = find(&bytes[from..], PATTERN) {
        let at = from + i;
        let rest = &bytes[at + PATTERN.len()..];
        let digits_at = rest.iter().position(|b| *b != b' ' && *b != b'\t');
        if let Some(d) = digits_at {
            let n = rest[d..].iter().take_while(|b| b.is_ascii_digit()).count();
            if n > 0 && rest[d + n..].starts_with(b"\r\n") {
                return Some(at);
            }
            if n > 0 && rest.len() < d + n + 2 {
                // Possibly a header still arriving; treat as one.
                return Some(at);
            }
        }
        from = at + 1;
    }
    None
}

impl Framer {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// How many leading bytes cannot begin a header block.
    fn garbage_len(&self) -> usize {
        const LEAD: &[u8] = b"Content-";
        (0..self.buf.len())
            .find(|&i| {
                let rest = &self.buf[i..];
                rest.starts_with(LEAD) || LEAD.starts_with(rest)
            })
            .unwrap_or(self.buf.len())
    }

    /// The next frame, or `None` when more input is needed.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            let garbage = self.garbage_len();
            if garbage > 0 {
                self.scanned = 0;
            }
            if garbage > 0 {
                let skipped: Vec<u8> = self.buf.drain(..garbage).collect();
                if skipped.iter().all(u8::is_ascii_whitespace) {
                    continue; // stray line breaks between messages are harmless
                }
                let preview =
                    String::from_utf8_lossy(&skipped[..skipped.len().min(40)]).into_owned();
                return Some(parse_error(format!(
                    "bytes outside a message were skipped: {preview:?}"
                )));
            }
            let Some(header_end) = find(&self.buf, b"\r\n\r\n") else {
                if self.buf.len() > MAX_HEADER {
                    self.buf.drain(..1);
                    return Some(parse_error("header block too long".into()));
                }
                return None;
            };
            let headers = String::from_utf8_lossy(&self.buf[..header_end]).into_owned();
            let body_start = header_end + 4;
            let length = match content_length(&headers) {
                Ok(n) => n,
                Err(e) => {
                    self.scanned = 0;
                    self.buf.drain(..body_start);
                    return Some(parse_error(e.to_string()));
                }
            };
            if length > MAX_BODY {
                self.scanned = 0;
                self.buf.drain(..body_start);
                return Some(parse_error(format!(
                    "message of {length} bytes is too large"
                )));
            }
            // A header inside the declared body means the length was too long: the body ends
            // there. (If the length was too short, the JSON fails to parse below.)
            let available = &self.buf[body_start..];
            let window = &available[..available.len().min(length)];
            // (A header may straddle the last read: look back a little.)
            let from = self.scanned.saturating_sub(32).min(window.len());
            let body_len = match next_header(&window[from..]) {
                Some(cut) => from + cut,
                None if available.len() >= length => length,
                None => {
                    self.scanned = window.len();
                    return None;
                }
            };
            self.scanned = 0;
            let body: Vec<u8> = self.buf[body_start..body_start + body_len].to_vec();
            self.buf.drain(..body_start + body_len);
            return Some(check_body(body));
        }
    }
}

/// What is wrong with a header block.
#[derive(Debug, thiserror::Error)]
enum HeaderError {
    #[error("malformed header line {0:?}")]
    Malformed(String),
    #[error("invalid Content-Length {value:?}: {source}")]
    BadLength {
        value: String,
        source: std::num::ParseIntError,
    },
    #[error("missing Content-Length header")]
    NoLength,
}

fn content_length(headers: &str) -> Result<usize, HeaderError> {
    let mut length = None;
    for line in headers.split("\r\n") {
        let Some((name, value)) = line.split_once(':') else {
            return Err(HeaderError::Malformed(line.to_string()));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            let n = value
                .parse::<usize>()
                .map_err(|source| HeaderError::BadLength {
                    value: value.to_string(),
                    source,
                })?;
            length = Some(n);
        }
    }
    length.ok_or(HeaderError::NoLength)
}

fn parse_error(message: String) -> Frame {
    Frame::Error {
        id: Value::Null,
        code: -32700,
        message: format!("Parse error: {message}"),
    }
}

/// Accepts a body only if tower-lsp-server will: a JSON-RPC request, notification or response.
fn check_body(body: Vec<u8>) -> Frame {
    // (Straight from the bytes: a 50 MB didOpen is parsed once here, not into a Value first.)
    if serde_json::from_slice::<Request>(&body).is_ok()
        || serde_json::from_slice::<Response>(&body).is_ok()
    {
        return Frame::Message(body);
    }
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return parse_error(format!("invalid JSON: {e}")),
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let id = if id.is_string() || id.is_number() {
        id
    } else {
        Value::Null
    };
    Frame::Error {
        id,
        code: -32600,
        message: "Invalid request: not a JSON-RPC 2.0 message".into(),
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads `input`, forwarding good messages (re-framed) to `to_server` and error replies to
/// `errors`. Ends at EOF, dropping `to_server` so the server sees its input close.
pub async fn pump_input<R: AsyncRead + Unpin>(
    mut input: R,
    mut to_server: DuplexStream,
    errors: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut framer = Framer::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        framer.push(&chunk[..n]);
        while let Some(f) = framer.next_frame() {
            match f {
                Frame::Message(body) => {
                    if to_server.write_all(&frame(&body)).await.is_err() {
                        return;
                    }
                }
                Frame::Error { id, code, message } => {
                    tracing::warn!(%message, "rejected a malformed message");
                    let reply = json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": {"code": code, "message": message},
                    });
                    let _ = errors.send(frame(reply.to_string().as_bytes()));
                }
            }
        }
    }
    let _ = to_server.shutdown().await;
}

/// Copies the server's output and the transport's error replies to `output`, whole frames at a
/// time. Ends when the server's output closes.
pub async fn pump_output<W: AsyncWrite + Unpin>(
    mut from_server: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) {
    let mut framer = Framer::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            biased;
            read = from_server.read(&mut chunk) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                framer.push(&chunk[..n]);
                while let Some(Frame::Message(body)) = framer.next_frame() {
                    if output.write_all(&frame(&body)).await.is_err() {
                        return;
                    }
                }
                let _ = output.flush().await;
            }
            Some(reply) = errors.recv() => {
                if output.write_all(&reply).await.is_err() {
                    return;
                }
                let _ = output.flush().await;
            }
        }
    }
    while let Ok(reply) = errors.try_recv() {
        let _ = output.write_all(&reply).await;
    }
    let _ = output.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &str) -> Vec<u8> {
        frame(body.as_bytes())
    }

    const GOOD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;

    fn drain(f: &mut Framer) -> Vec<Frame> {
        std::iter::from_fn(|| f.next_frame()).collect()
    }

    proptest::proptest! {
        // Good messages, each maybe preceded by garbage, cut at arbitrary points: every good
        // message comes out whole and in order, and the framer never panics.
        #[test]
        fn good_messages_survive_any_cuts_and_garbage(
            ids in proptest::collection::vec(0u32..1000, 1..6),
            garbage in proptest::collection::vec(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24), 6),
            cuts in proptest::collection::vec(1usize..64, 0..40),
        ) {
            let mut bytes = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                // Garbage without a blank line or a header, then a good message.
                let g: Vec<u8> = garbage[i].iter().copied().filter(|b| *b != b'\r' && *b != b'\n' && *b != b'C').collect();
                bytes.extend(g);
                bytes.extend(msg(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#)));
            }
            let mut f = Framer::default();
            let mut out = Vec::new();
            let mut at = 0;
            for c in cuts {
                let end = (at + c).min(bytes.len());
                f.push(&bytes[at..end]);
                out.extend(drain(&mut f));
                at = end;
            }
            f.push(&bytes[at..]);
            out.extend(drain(&mut f));
            let got: Vec<u32> = out
                .iter()
                .filter_map(|fr| match fr {
                    Frame::Message(b) => serde_json::from_slice::<Value>(b).ok()?["id"].as_u64().map(|n| n as u32),
                    _ => None,
                })
                .collect();
            proptest::prop_assert_eq!(got, ids);
        }
    }

    #[test]
    fn a_big_body_in_many_reads_is_framed_whole() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{{"t":"{}"}}}}"#,
            "a".repeat(32 * 1024 * 1024)
        );
        let bytes = msg(&body);
        let mut f = Framer::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(8 * 1024) {
            f.push(piece);
            out.extend(drain(&mut f));
        }
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0], Frame::Message(b) if b.len() == body.len()));
    }

    #[test]
    fn good_messages_pass_byte_by_byte() {
        let mut f = Framer::default();
        let bytes = [msg(GOOD), msg(r#"{"jsonrpc":"2.0","method":"exit"}"#)].concat();
        let mut out = Vec::new();
        for b in bytes {
            f.push(&[b]);
            out.extend(drain(&mut f));
        }
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Frame::Message(b) if b == GOOD.as_bytes()));
    }

    #[test]
    fn garbage_is_answered_and_the_next_message_survives() {
        let cases: Vec<Vec<u8>> = vec![
            b"hello there\r\n".to_vec(),
            b"Content-Length: abc\r\n\r\n{}".to_vec(),
            b"Content-Type: text/plain\r\n\r\n{}".to_vec(),
            msg("{not json"),
            msg(r#"{"id": 7, "no": "method"}"#),
            msg("[1,2,3]"),
            // Too short: the JSON is cut.
            [b"Content-Length: 10\r\n\r\n".as_slice(), GOOD.as_bytes()].concat(),
            // Too long: the next header shows where the body really ended.
            [b"Content-Length: 500\r\n\r\n".as_slice(), GOOD.as_bytes()].concat(),
        ];
        for case in cases {
            let mut f = Framer::default();
            f.push(&case);
            f.push(&msg(GOOD));
            let out = drain(&mut f);
            let label = String::from_utf8_lossy(&case).into_owned();
            assert!(
                matches!(out.last(), Some(Frame::Message(b)) if b == GOOD.as_bytes()),
                "{label}: {out:?}"
            );
            if !label.starts_with("Content-Length: 500") {
                assert!(
                    out.iter().any(|f| matches!(f, Frame::Error { .. })),
                    "{label}: {out:?}"
                );
            }
        }
    }

    #[test]
    fn invalid_request_keeps_its_id() {
        let mut f = Framer::default();
        f.push(&msg(r#"{"id": 7, "params": {}}"#));
        assert_eq!(
            f.next_frame(),
            Some(Frame::Error {
                id: json!(7),
                code: -32600,
                message: "Invalid request: not a JSON-RPC 2.0 message".into()
            })
        );
    }

    #[test]
    fn header_text_inside_a_json_string_is_not_a_header() {
        let body = r#"{"jsonrpc":"2.0","method":"x","params":{"t":"Content-Length: 5\r\n"}}"#;
        let mut f = Framer::default();
        f.push(&msg(body));
        assert_eq!(
            f.next_frame(),
            Some(Frame::Message(body.as_bytes().to_vec()))
        );
    }
}
