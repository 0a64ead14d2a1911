//! Server-sent events from a streaming HTTP answer (framing by `eventsource-stream`).

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};

use super::{EventStream, ProviderError, ProviderEvent};

/// The most one event may hold: past it the stream is garbage (or a runaway), not an answer.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// One SSE event: its `event:` name (empty when absent) and its `data:`.
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// A wire format's reading of SSE events into provider events.
pub trait Decode: Send + 'static {
    fn event(&mut self, e: &SseEvent) -> Vec<Result<ProviderEvent, ProviderError>>;
    /// At the end of the stream: the finish, or the error that it came too early.
    fn finish(&mut self) -> Vec<Result<ProviderEvent, ProviderError>>;
}

/// Sends a streaming request and reads its answer with `decoder`; the stream stops after
/// the first error.
pub async fn answer(
    http: reqwest::RequestBuilder,
    key_env: Option<&str>,
    decoder: impl Decode,
) -> Result<EventStream, ProviderError> {
    let resp = super::send(http, key_env).await?;
    Ok(read(resp.bytes_stream(), decoder))
}

/// A body's events read with `decoder`; the stream stops after the first error.
pub fn read<S, E>(body: S, mut decoder: impl Decode) -> EventStream
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let events = decode(body)
        .map(Some)
        .chain(futures::stream::once(async { None }));
    let mut failed = false;
    events
        .flat_map(move |item| {
            if failed {
                return futures::stream::iter(Vec::new());
            }
            let out = match item {
                Some(Ok(e)) => decoder.event(&e),
                Some(Err(e)) => vec![Err(e)],
                None => decoder.finish(),
            };
            failed = out.iter().any(|r| r.is_err());
            futures::stream::iter(out)
        })
        .boxed()
}

/// The events of a body's byte stream.
pub fn decode<S, E>(body: S) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    whole_events(body).eventsource().map(|item| {
        item.map(|e| SseEvent {
            event: e.event,
            data: e.data,
        })
        .map_err(|e| match e {
            // Garbage, not a broken connection: asking again would bring the same.
            eventsource_stream::EventStreamError::Transport(BodyError::Oversized(message)) => {
                ProviderError::Other { message }
            }
            eventsource_stream::EventStreamError::Transport(BodyError::Transport(message)) => {
                ProviderError::StreamBroken { message }
            }
            e => ProviderError::StreamBroken {
                message: e.to_string(),
            },
        })
    })
}

/// Why the body's bytes stopped.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Oversized(String),
}

/// The end of the last blank line (an event boundary) in `buf`, looking from `from` on.
fn last_boundary(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    (start..buf.len()).rev().find_map(|i| {
        let rest = &buf[i..];
        if rest.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// Hands the SSE parser whole events only. It scans its whole buffer again for each piece
/// it is given, which over one long event (a 20 MB chunk arriving in 16 KB reads) is
/// quadratic; here each byte is looked at once. An event past [`MAX_EVENT_BYTES`] ends the
/// stream with an error.
fn whole_events<S, E>(body: S) -> impl Stream<Item = Result<Vec<u8>, BodyError>> + Send
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    struct State<S> {
        body: S,
        buf: Vec<u8>,
        done: bool,
    }
    futures::stream::unfold(
        State {
            body,
            buf: Vec::new(),
            done: false,
        },
        |mut st| async move {
            loop {
                if st.done {
                    return None;
                }
                match st.body.next().await {
                    Some(Ok(piece)) => {
                        let from = st.buf.len();
                        st.buf.extend_from_slice(&piece);
                        if let Some(end) = last_boundary(&st.buf, from) {
                            let rest = st.buf.split_off(end);
                            let whole = std::mem::replace(&mut st.buf, rest);
                            return Some((Ok(whole), st));
                        }
                        if st.buf.len() > MAX_EVENT_BYTES {
                            st.done = true;
                            let message = format!(
                                "an event of the model's stream passed {} MB",
                                MAX_EVENT_BYTES / (1024 * 1024)
                            );
                            return Some((Err(BodyError::Oversized(message)), st));
                        }
                    }
                    Some(Err(e)) => {
                        // reqwest words a dropped connection "error decoding response body".
                        st.done = true;
                        let message = format!(
                            "the server closed the stream before the answer was complete ({e})"
                        );
                        return Some((Err(BodyError::Transport(message)), st));
                    }
                    None => {
                        st.done = true;
                        if st.buf.is_empty() {
                            return None;
                        }
                        return Some((Ok(std::mem::take(&mut st.buf)), st));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn collect(pieces: Vec<Vec<u8>>) -> Vec<Result<(String, String), String>> {
        let body = futures::stream::iter(
            pieces
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(bytes::Bytes::from(p))),
        );
        let events = futures::executor::block_on(decode(body).collect::<Vec<_>>());
        events
            .into_iter()
            .map(|e| e.map(|e| (e.event, e.data)).map_err(|e| e.to_string()))
            .collect()
    }

    const STREAM: &str =
        "event: a\ndata: {\"x\": 1}\n\ndata: two\r\n\r\n: comment\ndata: 3\ndata: 4\n\n";

    #[test]
    fn events_come_whole() {
        let got = collect(vec![STREAM.as_bytes().to_vec()]);
        assert_eq!(
            got,
            vec![
                Ok(("a".into(), "{\"x\": 1}".into())),
                Ok(("message".into(), "two".into())),
                Ok(("message".into(), "3\n4".into())),
            ]
        );
    }

    #[test]
    fn an_event_past_the_limit_ends_the_stream_with_an_error() {
        let big = vec![b'x'; 1024 * 1024];
        let mut pieces = vec![b"data: ".to_vec()];
        pieces.extend(std::iter::repeat_n(big, 9));
        let got = collect(pieces);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].as_ref().unwrap_err().contains("passed 8 MB"),
            "{got:?}"
        );
    }

    proptest! {
        // However the bytes are cut, the same events come out.
        #[test]
        fn any_split_gives_the_same_events(cuts in proptest::collection::vec(0usize..STREAM.len(), 0..12)) {
            let bytes = STREAM.as_bytes();
            let mut cuts = cuts;
            cuts.sort();
            cuts.dedup();
            let mut pieces = Vec::new();
            let mut last = 0;
            for c in cuts {
                pieces.push(bytes[last..c].to_vec());
                last = c;
            }
            pieces.push(bytes[last..].to_vec());
            prop_assert_eq!(collect(pieces), collect(vec![bytes.to_vec()]));
        }

        // Arbitrary bytes never panic the decoder.
        #[test]
        fn garbage_never_panics(pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let _ = collect(pieces);
        }
    }
}
