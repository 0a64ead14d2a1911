//! `read`: a file's lines, numbered; the editor's unsaved buffer when the file is open.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::files::{self, TextFile};
use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::PermissionRequest;

const DEFAULT_LIMIT: usize = 2000;
pub const MAX_LINE_CHARS: usize = 2000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// The file to read (relative to the workspace root, or absolute).
    pub file_path: String,
    /// The line to start at (1-based).
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to read (default 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

pub struct Read;

/// The permission a read of `display` needs (files like `.env` ask by default).
pub fn read_need(tool: &str, display: &str) -> Need {
    Need {
        request: PermissionRequest {
            permission: "read".into(),
            tool: tool.into(),
            title: format!("{tool} {display}"),
            patterns: vec![display.to_string()],
            always: vec![display.to_string()],
            ..Default::default()
        },
    }
}

/// A line as tools show it: cut after [`MAX_LINE_CHARS`] characters, saying so.
pub fn cut_line(line: &str) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!(
            "{}… (line cut at {MAX_LINE_CHARS} characters)",
            &line[..cut]
        )
        .into(),
        None => line.into(),
    }
}

/// Numbered lines, as `read` shows them: `00042| text`.
pub fn number_lines(text: &str, first: usize, limit: usize) -> (String, usize, usize) {
    let total = text.lines().count();
    let mut out = String::new();
    let mut shown = 0;
    for (i, line) in text.lines().enumerate().skip(first - 1).take(limit) {
        let line = cut_line(line);
        out.push_str(&format!("{:05}| {line}\n", i + 1));
        shown += 1;
    }
    (out, shown, total)
}

impl TypedTool for Read {
    type Args = Args;
    const NAME: &'static str = "read";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Reads a file and returns its lines numbered as `00001| text`. Reads up to 2000 lines \
         from `offset` (1-based); use offset and limit for long files. Lines over 2000 \
         characters are cut. When the file is open in the editor, its unsaved text is read. \
         Reading a folder lists its entries. Read several files in one step when you need \
         them all (the reads run at once)."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let mut needs = Vec::new();
        let r = ctx.resolve(&args.file_path, true, &mut needs, Self::NAME)?;
        let display = ctx.display(&r);
        needs.push(read_need(Self::NAME, &display));
        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                if r.real.is_dir() {
                    let mut names: Vec<String> = std::fs::read_dir(&r.real)?
                        .flatten()
                        .map(|e| {
                            let dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                            format!(
                                "{}{}",
                                e.file_name().to_string_lossy(),
                                if dir { "/" } else { "" }
                            )
                        })
                        .collect();
                    names.sort();
                    return Ok(ToolOutput {
                        title: display.clone(),
                        output: format!(
                            "{display} is a folder with {} entries:\n{}",
                            names.len(),
                            names.join("\n")
                        ),
                        ..Default::default()
                    });
                }
                let (file, from_buffer): (TextFile, bool) = match files::read_text(ctx, &r) {
                    Err(e) if e.0.contains("binary") => {
                        let kind = files::image_kind(&r.path).unwrap_or("binary file");
                        let size = std::fs::metadata(&r.real).map(|m| m.len()).unwrap_or(0);
                        return Err(ToolError::new(format!(
                            "{display} is a {kind} ({size} bytes); read shows text only"
                        )));
                    }
                    other => other?,
                };
                ctx.files.remember(&r.path);
                let (body, shown, total) = number_lines(&file.text, offset, limit);
                if total > 0 && offset > total {
                    return Err(ToolError::new(format!(
                        "offset {offset} is past the end of {display} ({total} lines)"
                    )));
                }
                let mut output = format!("<file path=\"{display}\">\n{body}");
                let last = offset + shown - 1;
                if last < total {
                    output.push_str(&format!(
                        "(lines {offset}-{last} of {total}; continue with offset {})\n",
                        last + 1
                    ));
                } else {
                    output.push_str(&format!("(end of file, {total} lines)\n"));
                }
                output.push_str("</file>");
                Ok(ToolOutput {
                    title: display.clone(),
                    output,
                    metadata: json!({"lines": total, "fromBuffer": from_buffer}),
                    ..Default::default()
                })
            })
        }))
    }
}
