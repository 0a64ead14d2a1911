//! `apply_patch`: several file changes in one patch (the `*** Begin Patch` format).
//!
//! Every hunk of every file is located and every new content computed before anything is
//! written: a patch applies whole or not at all. One permission ask covers the whole patch.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::files::{self, TextFile};
use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool, unified_diff};
use crate::editor::PermissionRequest;
use crate::permission::boundary::Resolved;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// The patch, from `*** Begin Patch` to `*** End Patch`.
    pub patch_text: String,
}

pub struct ApplyPatch;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    /// The text after `@@`, a line to find before the hunk.
    pub header: Option<String>,
    pub old: Vec<String>,
    pub new: Vec<String>,
    /// Anchored at the end of the file (`*** End of File`).
    pub eof: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

fn bad(line_no: usize, msg: &str) -> ToolError {
    ToolError::new(format!("invalid patch at line {line_no}: {msg}"))
}

/// Parses the patch format.
pub fn parse(text: &str) -> Result<Vec<Op>, ToolError> {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.trim().split('\n').collect();
    if lines.first().map(|l| l.trim()) != Some("*** Begin Patch") {
        return Err(bad(1, "the patch must start with `*** Begin Patch`"));
    }
    if lines.last().map(|l| l.trim()) != Some("*** End Patch") {
        return Err(bad(lines.len(), "the patch must end with `*** End Patch`"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let no = i + 2;
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            i += 1;
            while i < body.len() && !body[i].starts_with("*** ") {
                let l = body[i]
                    .strip_prefix('+')
                    .ok_or_else(|| bad(i + 2, "lines of an added file start with `+`"))?;
                content.push_str(l);
                content.push('\n');
                i += 1;
            }
            ops.push(Op::Add {
                path: path.trim().into(),
                content,
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            ops.push(Op::Delete {
                path: path.trim().into(),
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = body.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_string());
                i += 1;
            }
            let mut chunks: Vec<Chunk> = Vec::new();
            while i < body.len() {
                let l = body[i];
                if l == "*** End of File" {
                    match chunks.last_mut() {
                        Some(c) => c.eof = true,
                        None => return Err(bad(i + 2, "`*** End of File` before any hunk")),
                    }
                    i += 1;
                    continue;
                }
                if l.starts_with("*** ") {
                    break;
                }
                if let Some(h) = l.strip_prefix("@@") {
                    let h = h.trim();
                    chunks.push(Chunk {
                        header: (!h.is_empty()).then(|| h.to_string()),
                        ..Default::default()
                    });
                    i += 1;
                    continue;
                }
                if chunks.is_empty() {
                    chunks.push(Chunk::default());
                }
                let c = chunks.last_mut().expect("a chunk");
                match l.chars().next() {
                    Some('+') => c.new.push(l[1..].to_string()),
                    Some('-') => c.old.push(l[1..].to_string()),
                    Some(' ') => {
                        c.old.push(l[1..].to_string());
                        c.new.push(l[1..].to_string());
                    }
                    // An empty line inside a hunk is an empty context line.
                    None => {
                        c.old.push(String::new());
                        c.new.push(String::new());
                    }
                    Some(_) => return Err(bad(i + 2, "hunk lines start with ` `, `-` or `+`")),
                }
                i += 1;
            }
            if chunks.is_empty() && move_to.is_none() {
                return Err(bad(no, "an Update File section needs at least one hunk"));
            }
            ops.push(Op::Update {
                path: path.trim().into(),
                move_to,
                chunks,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(bad(no, &format!("unexpected line {line:?}")));
        }
    }
    if ops.is_empty() {
        return Err(bad(1, "the patch changes no file"));
    }
    Ok(ops)
}

/// Where `needle` occurs in `lines` at or after `from`: exact, then ignoring trailing
/// whitespace, then ignoring surrounding whitespace.
fn seek(lines: &[String], needle: &[String], from: usize, eof: bool) -> Option<usize> {
    if needle.is_empty() {
        return Some(if eof {
            lines.len()
        } else {
            from.min(lines.len())
        });
    }
    if needle.len() > lines.len() {
        return None;
    }
    let compare: [fn(&str, &str) -> bool; 3] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
    ];
    let last_start = lines.len() - needle.len();
    for eq in compare {
        let matches = |s: usize| needle.iter().enumerate().all(|(k, n)| eq(&lines[s + k], n));
        if eof {
            if matches(last_start) {
                return Some(last_start);
            }
            continue;
        }
        if let Some(s) = (from.min(last_start + 1)..=last_start).find(|&s| matches(s)) {
            return Some(s);
        }
    }
    None
}

/// The new text of a file after its chunks.
pub fn apply_chunks(text: &str, chunks: &[Chunk], display: &str) -> Result<String, ToolError> {
    let trailing_newline = text.ends_with('\n') || text.is_empty();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut cursor = 0;
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for c in chunks {
        if let Some(h) = &c.header {
            let found = (cursor..lines.len())
                .find(|&k| lines[k].trim() == h.trim() || lines[k].contains(h.as_str()));
            match found {
                Some(k) => cursor = k + 1,
                None => {
                    return Err(ToolError::new(format!(
                        "in {display}: could not find the line `@@ {h}`"
                    )));
                }
            }
        }
        let start = seek(&lines, &c.old, cursor, c.eof).ok_or_else(|| {
            ToolError::new(format!(
                "in {display}: could not find these lines{}:\n{}",
                if c.eof { " at the end of the file" } else { "" },
                c.old.join("\n")
            ))
        })?;
        edits.push((start, c.old.len(), c.new.clone()));
        cursor = start + c.old.len();
    }
    for (start, len, new) in edits.into_iter().rev() {
        lines.splice(start..start + len, new);
    }
    let mut out = lines.join("\n");
    if trailing_newline && !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// One file's planned change.
struct Change {
    from: Resolved,
    to: Option<Resolved>,
    /// `None` deletes.
    new_bytes: Option<Vec<u8>>,
    /// The bytes before, to roll back; `None` if the file did not exist.
    old_bytes: Option<Vec<u8>>,
    /// For a move over an existing file: that file's bytes, to roll back.
    replaced: Option<Vec<u8>>,
    summary: String,
}

fn resolve(ctx: &ToolContext, path: &str, needs: &mut Vec<Need>) -> Result<Resolved, ToolError> {
    ctx.resolve(path, false, needs, ApplyPatch::NAME)
}

impl TypedTool for ApplyPatch {
    type Args = Args;
    const NAME: &'static str = "apply_patch";

    fn description(&self, _: &ToolContext) -> String {
        "Applies a patch that adds, updates, moves and deletes files, all or nothing:\n\
         *** Begin Patch\n*** Add File: path\n+new line\n*** Update File: path\n\
         *** Move to: new/path (optional)\n@@ a line near the change (optional)\n context\n\
         -removed\n+added\n*** End of File (optional: the hunk ends the file)\n\
         *** Delete File: path\n*** End Patch\n\
         Keep three lines of context around each change."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let ops = parse(&args.patch_text)?;
        let mut needs = Vec::new();
        let mut changes: Vec<Change> = Vec::new();
        let mut diff = String::new();
        let mut patterns = Vec::new();
        for op in &ops {
            match op {
                Op::Add { path, content } => {
                    let r = resolve(ctx, path, &mut needs)?;
                    let display = ctx.display(&r);
                    if files::exists(&r) {
                        return Err(ToolError::new(format!(
                            "{display} already exists; use `*** Update File` to change it"
                        )));
                    }
                    diff += &unified_diff(&display, "", content);
                    patterns.push(display.clone());
                    changes.push(Change {
                        from: r,
                        to: None,
                        new_bytes: Some(content.clone().into_bytes()),
                        old_bytes: None,
                        replaced: None,
                        summary: format!("A {display}"),
                    });
                }
                Op::Delete { path } => {
                    let r = resolve(ctx, path, &mut needs)?;
                    let display = ctx.display(&r);
                    let old = files::read_bytes(ctx, &r)?;
                    diff += &unified_diff(&display, &String::from_utf8_lossy(&old), "");
                    patterns.push(display.clone());
                    changes.push(Change {
                        from: r,
                        to: None,
                        new_bytes: None,
                        old_bytes: Some(old),
                        replaced: None,
                        summary: format!("D {display}"),
                    });
                }
                Op::Update {
                    path,
                    move_to,
                    chunks,
                } => {
                    let r = resolve(ctx, path, &mut needs)?;
                    let display = ctx.display(&r);
                    let old_bytes = files::read_bytes(ctx, &r)?;
                    let file = TextFile::decode(&old_bytes, &display)?;
                    let new_text = apply_chunks(&file.text, chunks, &display)?;
                    let to = move_to
                        .as_deref()
                        .map(|p| resolve(ctx, p, &mut needs))
                        .transpose()?;
                    let target = to
                        .as_ref()
                        .map(|t| ctx.display(t))
                        .unwrap_or_else(|| display.clone());
                    diff += &unified_diff(&target, &file.text, &new_text);
                    patterns.push(display.clone());
                    if to.is_some() {
                        patterns.push(target.clone());
                    }
                    changes.push(Change {
                        summary: match &to {
                            Some(_) => format!("R {display} → {target}"),
                            None => format!("M {display}"),
                        },
                        replaced: to
                            .as_ref()
                            .filter(|t| t.path != r.path)
                            .and_then(|t| files::read_bytes(ctx, t).ok()),
                        from: r,
                        to,
                        new_bytes: Some(file.encode(&new_text).into_bytes()),
                        old_bytes: Some(old_bytes),
                    });
                }
            }
        }
        needs.push(Need {
            request: PermissionRequest {
                permission: "edit".into(),
                tool: Self::NAME.into(),
                title: format!("apply_patch to {} file(s)", changes.len()),
                patterns: patterns.clone(),
                always: vec!["*".into()],
                diff: Some(diff.clone()),
                changes: changes
                    .iter()
                    .map(|c| crate::editor::ProposedChange {
                        path: c.to.as_ref().unwrap_or(&c.from).path.clone(),
                        old_text: String::from_utf8_lossy(
                            c.old_bytes.as_deref().unwrap_or_default(),
                        )
                        .into_owned(),
                        new_text: String::from_utf8_lossy(
                            c.new_bytes.as_deref().unwrap_or_default(),
                        )
                        .into_owned(),
                    })
                    .collect(),
                ..Default::default()
            },
        });
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                let mut done: Vec<&Change> = Vec::new();
                let mut files_changed = Vec::new();
                for change in &changes {
                    if let Err(e) = write_change(ctx, change).await {
                        for undone in done.iter().rev() {
                            rollback(ctx, undone);
                        }
                        return Err(ToolError::new(format!(
                            "{e}; no file was changed (earlier changes of this patch were undone)"
                        )));
                    }
                    done.push(change);
                    files_changed.push(change.from.path.clone());
                    if let Some(to) = &change.to {
                        files_changed.push(to.path.clone());
                    }
                }
                let summary: Vec<&str> = changes.iter().map(|c| c.summary.as_str()).collect();
                Ok(ToolOutput {
                    title: format!("{} file(s)", changes.len()),
                    output: format!("Applied the patch:\n{}", summary.join("\n")),
                    metadata: json!({"diff": diff, "files": patterns}),
                    files_changed,
                    ..Default::default()
                })
            })
        }))
    }
}

async fn write_change(ctx: &ToolContext, c: &Change) -> Result<(), ToolError> {
    match (&c.new_bytes, &c.to) {
        (None, _) => files::delete(ctx, &c.from).await,
        (Some(bytes), None) => write_file(ctx, &c.from, bytes).await,
        (Some(bytes), Some(to)) if to.path != c.from.path => {
            if files::exists(to) {
                files::delete(ctx, to).await?;
            }
            files::rename(ctx, &c.from, to).await?;
            write_file(ctx, to, bytes).await
        }
        (Some(bytes), Some(to)) => write_file(ctx, to, bytes).await,
    }
}

/// Text goes through the editor's buffer when the file is open there; anything else, or a
/// new file, to disk.
async fn write_file(ctx: &ToolContext, r: &Resolved, bytes: &[u8]) -> Result<(), ToolError> {
    match std::str::from_utf8(bytes) {
        _ if !files::exists(r) => files::create(ctx, r, bytes).await.map(|_| ()),
        Ok(text) => files::write_text(ctx, r, text).await.map(|_| ()),
        Err(_) => {
            files::write_bytes(ctx, r, bytes)?;
            ctx.files.remember(&r.path);
            Ok(())
        }
    }
}

/// Best-effort undo of one written change, from the bytes kept in memory.
fn rollback(ctx: &ToolContext, c: &Change) {
    if let Some(to) = c.to.as_ref().filter(|t| t.path != c.from.path) {
        let _ = match &c.replaced {
            Some(bytes) => files::write_bytes(ctx, to, bytes),
            None => files::remove_file(ctx, to),
        };
    }
    match &c.old_bytes {
        Some(old) => {
            let _ = files::write_bytes(ctx, &c.from, old);
        }
        None => {
            let _ = files::remove_file(ctx, &c.from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_section() {
        let ops = parse(
            "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** Update File: b.rs\n*** Move to: c.rs\n@@ fn main\n-old\n+new\n*** End of File\n*** Delete File: d.txt\n*** End Patch",
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            Op::Add {
                path: "a.txt".into(),
                content: "hello\n".into()
            }
        );
        match &ops[1] {
            Op::Update {
                move_to, chunks, ..
            } => {
                assert_eq!(move_to.as_deref(), Some("c.rs"));
                assert_eq!(chunks[0].header.as_deref(), Some("fn main"));
                assert!(chunks[0].eof);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse("*** Update File: x\n").is_err());
        assert!(parse("*** Begin Patch\n*** Frobnicate: x\n*** End Patch").is_err());
    }

    #[test]
    fn chunks_find_their_place() {
        let text = "a\nb\nc\nd\nb\ne\n";
        let chunk = |header: Option<&str>, old: &[&str], new: &[&str], eof| Chunk {
            header: header.map(String::from),
            old: old.iter().map(|s| s.to_string()).collect(),
            new: new.iter().map(|s| s.to_string()).collect(),
            eof,
        };
        // The header moves the search past the first `b`.
        let out = apply_chunks(text, &[chunk(Some("d"), &["b"], &["B"], false)], "f").unwrap();
        assert_eq!(out, "a\nb\nc\nd\nB\ne\n");
        let out = apply_chunks(text, &[chunk(None, &["e"], &["E", "F"], true)], "f").unwrap();
        assert_eq!(out, "a\nb\nc\nd\nb\nE\nF\n");
        assert!(apply_chunks(text, &[chunk(None, &["a"], &["x"], true)], "f").is_err());
        assert!(apply_chunks(text, &[chunk(None, &["zz"], &["x"], false)], "f").is_err());
        // Trailing whitespace in the patch is tolerated.
        let out = apply_chunks("x  \ny\n", &[chunk(None, &["x"], &["z"], false)], "f").unwrap();
        assert_eq!(out, "z\ny\n");
    }
}
