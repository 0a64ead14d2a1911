//! `webfetch`: fetches an http(s) URL, as markdown, text or HTML.
//!
//! The SSRF guard: the host is resolved here, every address is checked (loopback, private,
//! link-local, CGNAT, multicast, unspecified, and IPv4-mapped or NAT64 forms of them are
//! refused unless configuration names the host), and the connection goes to the address that
//! was checked (no second lookup to rebind). Redirects are followed by hand, each checked the
//! same way, at most five.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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

/// IPv4 ranges that are not globally reachable: the IANA IPv4 Special-Purpose Address
/// Registry's entries that are not (loopback, private, shared, link-local, documentation,
/// benchmarking, protocol assignments, reserved, broadcast), the deprecated 6to4 relay
/// anycast, and multicast. (address, prefix length)
const V4_REFUSED: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),       // "this network"
    ([10, 0, 0, 0], 8),      // private
    ([100, 64, 0, 0], 10),   // shared address space (CGNAT)
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local (cloud metadata)
    ([172, 16, 0, 0], 12),   // private
    ([192, 0, 0, 0], 24),    // IETF protocol assignments (but see V4_GLOBAL)
    ([192, 0, 2, 0], 24),    // TEST-NET-1
    ([192, 88, 99, 0], 24),  // 6to4 relay anycast (deprecated)
    ([192, 168, 0, 0], 16),  // private
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // TEST-NET-2
    ([203, 0, 113, 0], 24),  // TEST-NET-3
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, and the limited broadcast address
];

/// Addresses inside a refused range that the registry marks globally reachable.
const V4_GLOBAL: &[[u8; 4]] = &[[192, 0, 0, 9], [192, 0, 0, 10]]; // PCP and TURN anycast

/// IPv6 ranges that are not globally reachable (the IANA IPv6 Special-Purpose Address
/// Registry), as (address segments, prefix length). Ranges that carry an IPv4 address are
/// checked by that address instead (see [`embedded_v4`]).
const V6_REFUSED: &[([u16; 8], u8)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 128),         // unspecified
    ([0, 0, 0, 0, 0, 0, 0, 1], 128),         // loopback
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),  // local-use NAT64
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64),      // discard-only
    ([0x100, 0, 0, 1, 0, 0, 0, 0], 64),      // dummy prefix
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),     // IETF protocol assignments, Teredo included
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),     // documentation
    ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),     // segment routing SIDs
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),      // unique local
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),     // link-local
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),     // site-local (deprecated)
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),      // multicast
];

/// Addresses inside 2001::/23 that the registry marks globally reachable.
const V6_GLOBAL: &[([u16; 8], u8)] = &[
    ([0x2001, 1, 0, 0, 0, 0, 0, 1], 128),    // PCP anycast
    ([0x2001, 1, 0, 0, 0, 0, 0, 2], 128),    // TURN anycast
    ([0x2001, 1, 0, 0, 0, 0, 0, 3], 128),    // DNS-SD service registration anycast
    ([0x2001, 3, 0, 0, 0, 0, 0, 0], 32),     // AMT
    ([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48), // AS112-v6
    ([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28),  // ORCHIDv2
    ([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28),  // drone remote ID
];

fn in_v4(ip: Ipv4Addr, (net, len): ([u8; 4], u8)) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, (net, len): ([u16; 8], u8)) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn v4_refused(ip: Ipv4Addr) -> bool {
    V4_REFUSED.iter().any(|r| in_v4(ip, *r)) && !V4_GLOBAL.contains(&ip.octets())
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        Some(v4)
    } else if (s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1))
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        Some(tail)
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]))
    } else {
        None
    }
}

/// Whether an address is one webfetch must not reach (unless its host is allowed): any
/// address that is not globally reachable, or that carries one.
pub fn refused(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_refused(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_refused(v4),
            None => {
                V6_REFUSED.iter().any(|r| in_v6(v6, *r)) && !V6_GLOBAL.iter().any(|r| in_v6(v6, *r))
            }
        },
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

    /// Every range of the tables, by an address inside it and one just outside; the
    /// registry's globally reachable exceptions; what the attack run reached.
    #[test]
    fn every_special_purpose_range_is_refused() {
        for &(net, len) in V4_REFUSED {
            let first = u32::from(Ipv4Addr::from(net));
            let inside = Ipv4Addr::from(first + 1);
            assert!(v4_refused(inside), "{inside} in {net:?}/{len}");
            let last = first | u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            assert!(v4_refused(Ipv4Addr::from(last)), "the end of {net:?}/{len}");
        }
        for &(net, len) in V6_REFUSED {
            let inside = Ipv6Addr::from(u128::from(Ipv6Addr::from(net)) | u128::from(len < 128));
            assert!(refused(IpAddr::V6(inside)), "{inside} in {net:?}/{len}");
        }
        for global in V4_GLOBAL {
            assert!(!v4_refused(Ipv4Addr::from(*global)), "{global:?} is global");
        }
        for &(net, _) in V6_GLOBAL {
            let ip = Ipv6Addr::from(net);
            assert!(!refused(IpAddr::V6(ip)), "{ip} is global");
        }
        for reached in [
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.254",
            "192.0.0.1",
            "192.0.0.170",
            "2002:7f00:1::1",
        ] {
            assert!(refused(reached.parse().unwrap()), "{reached}");
        }
        // IPv4 inside IPv6: 6to4, NAT64, mapped and compatible carry a private one.
        for carried in [
            "2002:a00:1::",
            "2002:c0a8:101::1",
            "64:ff9b::7f00:1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "2001:0:4136:e378::1",
        ] {
            assert!(refused(carried.parse().unwrap()), "{carried}");
        }
        // Just outside the ranges: public.
        for public in [
            "100.128.0.1",
            "198.20.0.1",
            "192.0.3.1",
            "192.31.196.1",
            "2002:5db8:d822::1",
            "64:ff9b::5db8:d822",
            "2001:4860:4860::8888",
        ] {
            assert!(!refused(public.parse().unwrap()), "{public} is public");
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
