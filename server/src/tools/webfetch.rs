//! `webfetch`: fetches an http(s) URL, as markdown, text or HTML.
//!
//! The SSRF guard: the host is resolved here, every address is checked (loopback, private,
//! link-local, CGNAT, multicast, unspecified, and IPv4-mapped or NAT64 forms of them are
//! refused unless configuration names the host), and the connection goes to the address that
//! was checked (no second lookup to rebind). Redirects are followed by hand, each checked the
//! same way, at most five.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::PermissionRequest;

const MAX_BYTES: usize = 5 * 1024 * 1024;
const MAX_REDIRECTS: usize = 5;
const DEFAULT_TIMEOUT_S: u64 = 30;
const MAX_TIMEOUT_S: u64 = 120;

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Markdown,
    Text,
    Html,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// An http:// or https:// URL.
    pub url: String,
    /// markdown (default), text or html.
    #[serde(default)]
    pub format: Format,
    /// Seconds to wait (default 30, at most 120).
    #[serde(default)]
    pub timeout: Option<u64>,
}

pub struct WebFetch;

fn v4_refused(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT 100.64.0.0/10
        || o[0] >= 240 // reserved
}

/// Whether an address is one webfetch must not reach (unless its host is allowed).
pub fn refused(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_refused(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_refused(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let o = v6.octets();
                return v4_refused(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
                || (s[0..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible ::a.b.c.d
        }
    }
}

/// Resolves and checks `url`'s host; returns the address to connect to.
async fn checked_address(url: &url::Url, allow: &[String]) -> Result<SocketAddr, ToolError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(format!(
            "only http and https URLs can be fetched, not {}",
            url.scheme()
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| ToolError::new("the URL has no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| ToolError::new(format!("cannot resolve {host}: {e}")))?
            .collect(),
    };
    let allowed = allow.iter().any(|h| h.eq_ignore_ascii_case(bare));
    if !allowed && let Some(bad) = addrs.iter().find(|a| refused(a.ip())) {
        return Err(ToolError::new(format!(
            "refused: {host} resolves to {}, a loopback, private or otherwise internal address \
             (configuration can allow a host with webfetch_allow_hosts)",
            bad.ip()
        )));
    }
    addrs
        .first()
        .copied()
        .ok_or_else(|| ToolError::new(format!("{host} has no address")))
}

fn to_markdown(html: &str) -> String {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(vec!["script", "style", "noscript", "iframe", "svg", "head"])
        .build()
        .convert(html)
        .unwrap_or_else(|_| html.to_string())
}

/// Markdown without its markup, for `format: text`.
fn to_text(html: &str) -> String {
    let md = to_markdown(html);
    let links = regex::Regex::new(r"!?\[([^\]]*)\]\([^)]*\)").expect("static regex");
    let text = links.replace_all(&md, "$1");
    text.lines()
        .map(|l| {
            l.trim_start_matches(['#', '>', ' '])
                .replace("**", "")
                .replace('`', "")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl TypedTool for WebFetch {
    type Args = Args;
    const NAME: &'static str = "webfetch";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Fetches a web page (http/https) and returns it as markdown (default), text or html. \
         At most 5 MB; addresses inside private networks are refused. Use it for documentation or pages the \
         user names, not for the workspace's own files."
            .into()
    }

    fn prepare(&self, args: Args, _: &ToolContext) -> Result<Prepared, ToolError> {
        let url = url::Url::parse(&args.url)
            .map_err(|e| ToolError::new(format!("invalid URL {:?}: {e}", args.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::new(format!(
                "only http and https URLs can be fetched, not {}",
                url.scheme()
            )));
        }
        let origin = format!(
            "{}://{}/*",
            url.scheme(),
            url.host_str().unwrap_or_default()
        );
        let need = Need {
            request: PermissionRequest {
                permission: "webfetch".into(),
                tool: Self::NAME.into(),
                title: format!("fetch {url}"),
                patterns: vec![url.to_string()],
                always: vec![origin],
                url: Some(url.to_string()),
                ..Default::default()
            },
        };
        let timeout = Duration::from_secs(
            args.timeout
                .unwrap_or(DEFAULT_TIMEOUT_S)
                .clamp(1, MAX_TIMEOUT_S),
        );
        Ok(Prepared::new(vec![need], move |ctx| {
            Box::pin(async move {
                tokio::select! {
                    r = tokio::time::timeout(timeout, fetch(url, args.format, timeout, ctx)) => {
                        r.map_err(|_| ToolError::new(format!("timed out after {} s", timeout.as_secs())))?
                    }
                    _ = ctx.cancel.cancelled() => Err(ToolError::new("interrupted: the fetch was cancelled")),
                }
            })
        }))
    }
}

async fn fetch(
    mut url: url::Url,
    format: Format,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    for _ in 0..=MAX_REDIRECTS {
        let addr = checked_address(&url, &ctx.webfetch_allow_hosts).await?;
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, addr)
            .timeout(timeout)
            .user_agent(concat!("agent-lsp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ToolError::new(format!("cannot build an HTTP client: {e}")))?;
        let accept = match format {
            Format::Html => "text/html, */*;q=0.8",
            _ => "text/markdown, text/plain, text/html;q=0.9, */*;q=0.8",
        };
        let resp = client
            .get(url.clone())
            .header("accept", accept)
            .send()
            .await
            .map_err(|e| ToolError::new(format!("cannot fetch {url}: {e}")))?;
        let status = resp.status();
        if status.is_redirection() {
            let location = resp
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| {
                    ToolError::new(format!("{url} redirected ({status}) without a Location"))
                })?;
            url = url
                .join(location)
                .map_err(|e| ToolError::new(format!("bad redirect to {location:?}: {e}")))?;
            continue;
        }
        if !status.is_success() {
            return Err(ToolError::new(format!("{url} answered HTTP {status}")));
        }
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if let Some(len) = resp.content_length()
            && len as usize > MAX_BYTES
        {
            return Err(ToolError::new(format!(
                "{url} is {len} bytes, over the {MAX_BYTES}-byte limit"
            )));
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ToolError::new(format!("reading {url}: {e}")))?;
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(ToolError::new(format!(
                    "{url} is over the {MAX_BYTES}-byte limit"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if super::files::looks_binary(&body) {
            return Err(ToolError::new(format!(
                "{url} is binary ({content_type}, {} bytes); only text can be shown",
                body.len()
            )));
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        let is_html = content_type.contains("html") || text.trim_start().starts_with('<');
        let output = match (format, is_html) {
            (Format::Markdown, true) => to_markdown(&text),
            (Format::Text, true) => to_text(&text),
            _ => text,
        };
        return Ok(ToolOutput {
            title: format!("{url} ({content_type})"),
            output,
            metadata: json!({"url": url.to_string(), "contentType": content_type, "bytes": body.len()}),
            ..Default::default()
        });
    }
    Err(ToolError::new(format!(
        "more than {MAX_REDIRECTS} redirects"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_classes() {
        let bad = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "::127.0.0.1",
        ];
        for a in bad {
            assert!(refused(a.parse().unwrap()), "{a} must be refused");
        }
        for a in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert!(!refused(a.parse().unwrap()), "{a} is public");
        }
    }

    #[test]
    fn html_becomes_markdown_without_scripts() {
        let html = "<html><head><title>T</title><script>evil()</script></head><body><h1>Hi</h1><p>a <a href=\"/x\">link</a></p><style>p{}</style></body></html>";
        let md = to_markdown(html);
        assert!(md.contains("# Hi"), "{md}");
        assert!(md.contains("[link](/x)"), "{md}");
        assert!(!md.contains("evil") && !md.contains("p{}"), "{md}");
        let text = to_text(html);
        assert!(
            text.contains("Hi") && text.contains("a link") && !text.contains("](/x)"),
            "{text}"
        );
    }
}
