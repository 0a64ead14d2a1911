//! The editor's language intelligence for the agent: `agent/diagnostics` (the problems the
//! client's language servers publish) and `agent/lsp` (a standard request the client runs
//! against them). Positions go out in the negotiated encoding and come back as the
//! 1-based character columns the agent's tools use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::*;

use super::bridge::{Buffers, file_uri, uri_path};
use super::documents::{Document, PositionEncoding};
use super::protocol::{self as wire, CodeRequest};
use crate::editor::{CodeAnswer, CodeQuery, NoCodeAnswer, Place, Problem, Severity, Symbol};

/// How long the client may take for an `agent/lsp` answer.
const CODE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// What an `agent/diagnostics` answer may take beyond the wait it was given.
const DIAGNOSTICS_GRACE: Duration = Duration::from_secs(2);

/// A file's text for position conversion: the open buffer, else the disk.
fn document(buffers: &dyn Buffers, path: &Path) -> Option<(Uri, Document)> {
    buffers.open_document(path).or_else(|| {
        let text = std::fs::read_to_string(path).ok()?;
        Some((file_uri(path)?, Document::new(&text, 0, "")))
    })
}

/// An LSP position as a 1-based line and character column.
fn place_of(path: &Path, pos: Position, doc: Option<&Document>, enc: PositionEncoding) -> Place {
    let (line, column) = match doc {
        Some(d) => {
            let idx = d.char_index(pos, enc);
            let line = d.text.char_to_line(idx);
            (line, idx - d.text.line_to_char(line))
        }
        None => (pos.line as usize, pos.character as usize),
    };
    Place {
        path: path.to_path_buf(),
        line: line as u32 + 1,
        column: column as u32 + 1,
    }
}

/// A 1-based line and character column as an LSP position (clamped to the line).
fn position_of(place: &Place, doc: &Document, enc: PositionEncoding) -> Position {
    let last = doc.text.len_lines().saturating_sub(1);
    let line = (place.line as usize).saturating_sub(1).min(last);
    let start = doc.text.line_to_char(line);
    let len = doc.text.line(line).len_chars();
    let idx = start + (place.column as usize).saturating_sub(1).min(len);
    doc.position(idx, enc)
}

/// The problems the client reports in `paths` (those it can see), or `None` when it cannot
/// say in time.
pub async fn problems(
    client: &Client,
    buffers: &dyn Buffers,
    paths: &[PathBuf],
    wait: Duration,
) -> Option<Vec<Problem>> {
    let caps = buffers.caps();
    if !caps.diagnostics {
        return None;
    }
    let uris: Vec<Uri> = paths
        .iter()
        .filter_map(|p| match buffers.open_document(p) {
            Some((uri, _)) => Some(uri),
            None if caps.diagnostics_unopened => file_uri(p),
            None => None,
        })
        .collect();
    if uris.is_empty() {
        return Some(Vec::new());
    }
    let params = wire::DiagnosticsParams {
        uris,
        wait_ms: wait.as_millis() as u64,
    };
    let asked = client.send_request::<wire::Diagnostics>(params);
    let answer = match tokio::time::timeout(wait + DIAGNOSTICS_GRACE, asked).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            tracing::warn!("the editor did not give its diagnostics: {}", e.message);
            return None;
        }
        Err(_) => {
            tracing::warn!("the editor did not give its diagnostics in time");
            return None;
        }
    };
    let enc = buffers.encoding();
    let mut found = Vec::new();
    for item in answer.items {
        let Some(path) = uri_path(&item.uri) else {
            continue;
        };
        let doc = document(buffers, &path).map(|(_, d)| d);
        for value in item.diagnostics {
            // One malformed entry costs only itself.
            let Ok(d) = serde_json::from_value::<Diagnostic>(value) else {
                continue;
            };
            found.push(problem(&path, d, doc.as_ref(), enc));
        }
    }
    Some(found)
}

fn problem(path: &Path, d: Diagnostic, doc: Option<&Document>, enc: PositionEncoding) -> Problem {
    let at = place_of(path, d.range.start, doc, enc);
    let severity = match d.severity {
        Some(DiagnosticSeverity::WARNING) => Severity::Warning,
        Some(DiagnosticSeverity::INFORMATION) => Severity::Information,
        Some(DiagnosticSeverity::HINT) => Severity::Hint,
        // Unset is for the client to interpret; an error is the safe reading.
        _ => Severity::Error,
    };
    Problem {
        path: at.path,
        line: at.line,
        column: at.column,
        severity,
        message: d.message,
        source: d.source,
        code: d.code.map(|c| match c {
            NumberOrString::Number(n) => n.to_string(),
            NumberOrString::String(s) => s,
        }),
    }
}

/// Runs `query` through the client's language servers.
pub async fn code_query(
    client: &Client,
    buffers: &dyn Buffers,
    query: &CodeQuery,
) -> Result<CodeAnswer, NoCodeAnswer> {
    if !buffers.caps().code_requests {
        return Err("this editor does not share its language servers".into());
    }
    let enc = buffers.encoding();
    let at = |place: &Place| -> Result<Value, NoCodeAnswer> {
        let (uri, doc) = document(buffers, &place.path)
            .ok_or_else(|| NoCodeAnswer(format!("cannot read {}", place.path.display())))?;
        let position = position_of(place, &doc, enc);
        Ok(json!({"textDocument": {"uri": uri}, "position": position}))
    };
    let (method, params) = match query {
        CodeQuery::Definition(p) => ("textDocument/definition", at(p)?),
        CodeQuery::Implementation(p) => ("textDocument/implementation", at(p)?),
        CodeQuery::Hover(p) => ("textDocument/hover", at(p)?),
        CodeQuery::References(p) => {
            let mut params = at(p)?;
            params["context"] = json!({"includeDeclaration": true});
            ("textDocument/references", params)
        }
        CodeQuery::DocumentSymbols(path) => {
            let uri = document(buffers, path)
                .map(|(uri, _)| uri)
                .ok_or_else(|| NoCodeAnswer(format!("cannot read {}", path.display())))?;
            (
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": uri}}),
            )
        }
        CodeQuery::WorkspaceSymbols(q) => ("workspace/symbol", json!({"query": q})),
    };
    let asked = client.send_request::<CodeRequest>(wire::CodeRequestParams {
        method: method.into(),
        params,
    });
    let result = match tokio::time::timeout(CODE_REQUEST_TIMEOUT, asked).await {
        Ok(Ok(v)) => v.0,
        Ok(Err(e)) => {
            let why = format!("the editor's language servers failed: {}", e.message);
            return Err(why.into());
        }
        Err(_) => return Err("the editor's language servers did not answer in 10 s".into()),
    };
    answer(query, result, buffers)
}

fn parse<T: DeserializeOwned>(method: &str, v: Value) -> Result<Option<T>, NoCodeAnswer> {
    if v.is_null() {
        return Ok(None);
    }
    serde_json::from_value(v).map(Some).map_err(|e| {
        NoCodeAnswer(format!(
            "the editor's answer to {method} is not what LSP defines: {e}"
        ))
    })
}

/// The standard result of the query's request, in the agent's terms.
fn answer(
    query: &CodeQuery,
    result: Value,
    buffers: &dyn Buffers,
) -> Result<CodeAnswer, NoCodeAnswer> {
    let enc = buffers.encoding();
    let located = |uri: &Uri, pos: Position| -> Option<Place> {
        let path = uri_path(uri)?;
        let doc = document(buffers, &path).map(|(_, d)| d);
        Some(place_of(&path, pos, doc.as_ref(), enc))
    };
    let places = |locations: Vec<(Uri, Position)>| {
        CodeAnswer::Places(
            locations
                .iter()
                .filter_map(|(uri, pos)| located(uri, *pos))
                .collect(),
        )
    };
    Ok(match query {
        CodeQuery::Definition(_) | CodeQuery::Implementation(_) => {
            let found = parse::<GotoDefinitionResponse>("a definition request", result)?;
            places(match found {
                None => Vec::new(),
                Some(GotoDefinitionResponse::Scalar(l)) => vec![(l.uri, l.range.start)],
                Some(GotoDefinitionResponse::Array(ls)) => {
                    ls.into_iter().map(|l| (l.uri, l.range.start)).collect()
                }
                Some(GotoDefinitionResponse::Link(ls)) => ls
                    .into_iter()
                    .map(|l| (l.target_uri, l.target_selection_range.start))
                    .collect(),
            })
        }
        CodeQuery::References(_) => {
            let found = parse::<Vec<Location>>("textDocument/references", result)?;
            places(
                found
                    .unwrap_or_default()
                    .into_iter()
                    .map(|l| (l.uri, l.range.start))
                    .collect(),
            )
        }
        CodeQuery::Hover(_) => {
            let found = parse::<Hover>("textDocument/hover", result)?;
            CodeAnswer::Text(found.map(|h| hover_text(h.contents)).unwrap_or_default())
        }
        CodeQuery::DocumentSymbols(_) | CodeQuery::WorkspaceSymbols(_) => {
            symbols(query, result, buffers, &located)?
        }
    })
}

/// An outline or a workspace search, in the agent's terms.
fn symbols(
    query: &CodeQuery,
    result: Value,
    buffers: &dyn Buffers,
    located: &dyn Fn(&Uri, Position) -> Option<Place>,
) -> Result<CodeAnswer, NoCodeAnswer> {
    let enc = buffers.encoding();
    Ok(match query {
        CodeQuery::DocumentSymbols(path) => {
            let found = parse::<DocumentSymbolResponse>("textDocument/documentSymbol", result)?;
            let doc = document(buffers, path).map(|(_, d)| d);
            let mut out = Vec::new();
            match found {
                None => {}
                Some(DocumentSymbolResponse::Flat(list)) => {
                    out.extend(
                        list.into_iter()
                            .filter_map(|s| flat_symbol(s.name, s.kind, &s.location, located)),
                    );
                }
                Some(DocumentSymbolResponse::Nested(list)) => {
                    outline(&list, 0, path, doc.as_ref(), enc, &mut out);
                }
            }
            CodeAnswer::Symbols(out)
        }
        CodeQuery::WorkspaceSymbols(_) => {
            let found = parse::<WorkspaceSymbolResponse>("workspace/symbol", result)?;
            CodeAnswer::Symbols(match found {
                None => Vec::new(),
                Some(WorkspaceSymbolResponse::Flat(list)) => list
                    .into_iter()
                    .filter_map(|s| flat_symbol(s.name, s.kind, &s.location, located))
                    .collect(),
                Some(WorkspaceSymbolResponse::Nested(list)) => list
                    .into_iter()
                    .filter_map(|s| match s.location {
                        OneOf::Left(l) => flat_symbol(s.name, s.kind, &l, located),
                        // A location without a range: the file's start.
                        OneOf::Right(w) => flat_symbol(
                            s.name,
                            s.kind,
                            &Location::new(w.uri, Range::default()),
                            located,
                        ),
                    })
                    .collect(),
            })
        }
        _ => CodeAnswer::Symbols(Vec::new()),
    })
}

fn kind_name(kind: SymbolKind) -> String {
    format!("{kind:?}").to_lowercase()
}

fn flat_symbol(
    name: String,
    kind: SymbolKind,
    location: &Location,
    located: &dyn Fn(&Uri, Position) -> Option<Place>,
) -> Option<Symbol> {
    Some(Symbol {
        name,
        kind: kind_name(kind),
        place: located(&location.uri, location.range.start)?,
        depth: 0,
    })
}

fn outline(
    list: &[DocumentSymbol],
    depth: usize,
    path: &Path,
    doc: Option<&Document>,
    enc: PositionEncoding,
    out: &mut Vec<Symbol>,
) {
    for s in list {
        out.push(Symbol {
            name: s.name.clone(),
            kind: kind_name(s.kind),
            place: place_of(path, s.selection_range.start, doc, enc),
            depth,
        });
        if let Some(children) = &s.children {
            outline(children, depth + 1, path, doc, enc, out);
        }
    }
}

fn hover_text(contents: HoverContents) -> String {
    let marked = |m: MarkedString| match m {
        MarkedString::String(s) => s,
        MarkedString::LanguageString(l) => format!("```{}\n{}\n```", l.language, l.value),
    };
    match contents {
        HoverContents::Scalar(m) => marked(m),
        HoverContents::Array(list) => list
            .into_iter()
            .map(marked)
            .collect::<Vec<_>>()
            .join("\n\n"),
        HoverContents::Markup(m) => m.value,
    }
}
