//! `edit`: replaces text in a file.
//!
//! Models copy code imperfectly, so after an exact match the search falls back, in order, to
//! matching lines with their ends trimmed, with whitespace runs normalised, with indentation
//! shifted, and finally to a block anchored on its first and last lines whose middle is
//! similar enough. Whatever matches must be unique unless `replaceAll`. The file keeps its
//! line endings and BOM, and an edit of a file changed on disk since the agent read it is
//! refused.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::files::{self, TextFile};
use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool, edit_need, unified_diff};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// The file to edit (relative to the workspace root, or absolute).
    pub file_path: String,
    /// The text to replace. Include enough surrounding lines to make it unique.
    pub old_string: String,
    /// The replacement text.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

pub struct Edit;

/// Middle-line similarity a block-anchor match needs.
const BLOCK_SIMILARITY: f32 = 0.5;

fn lines_of(s: &str) -> Vec<&str> {
    let s = s.strip_suffix('\n').unwrap_or(s);
    s.split('\n').collect()
}

/// Byte ranges of each line of `content` (without its newline).
fn line_spans(content: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for line in content.split('\n') {
        spans.push((start, start + line.len()));
        start += line.len() + 1;
    }
    spans
}

/// Candidates from windows of `n` content lines that `same` accepts.
fn windows(content: &str, n: usize, same: impl Fn(&[&str]) -> bool) -> Vec<&str> {
    let spans = line_spans(content);
    let lines: Vec<&str> = spans.iter().map(|(s, e)| &content[*s..*e]).collect();
    if n == 0 || n > lines.len() {
        return Vec::new();
    }
    (0..=lines.len() - n)
        .filter(|&i| same(&lines[i..i + n]))
        .map(|i| &content[spans[i].0..spans[i + n - 1].1])
        .collect()
}

fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                l[indent..].to_string()
            } else {
                l.trim_start().to_string()
            }
        })
        .collect()
}

/// The strategies, in order. Each returns substrings of `content` that `find` may stand for.
fn candidates<'a>(content: &'a str, find: &str) -> Vec<(&'static str, Vec<&'a str>)> {
    let find_lines = lines_of(find);
    let n = find_lines.len();
    let mut out = Vec::new();

    out.push((
        "exact",
        content
            .match_indices(find)
            .map(|(i, _)| &content[i..i + find.len()])
            .take(1)
            .collect(),
    ));
    out.push((
        "line-trimmed",
        windows(content, n, |w| {
            w.iter().zip(&find_lines).all(|(a, b)| a.trim() == b.trim())
        }),
    ));
    let target = normalize_ws(find);
    let mut ws = windows(content, n, |w| normalize_ws(&w.join("\n")) == target);
    if ws.is_empty() && n == 1 && !target.is_empty() {
        // A fragment inside a line: match its words separated by any whitespace.
        let pattern = target
            .split(' ')
            .map(regex::escape)
            .collect::<Vec<_>>()
            .join(r"\s+");
        if let Ok(re) = regex::Regex::new(&pattern) {
            ws = re.find_iter(content).map(|m| m.as_str()).collect();
        }
    }
    out.push(("whitespace-normalised", ws));
    let want = dedent(&find_lines);
    out.push((
        "indentation-flexible",
        windows(content, n, |w| dedent(w) == want),
    ));
    out.push(("block-anchor", block_anchor(content, &find_lines)));
    out
}

/// Blocks whose first and last lines match `find`'s (trimmed) and whose middle is similar.
fn block_anchor<'a>(content: &'a str, find: &[&str]) -> Vec<&'a str> {
    if find.len() < 3 {
        return Vec::new();
    }
    let (first, last) = (find[0].trim(), find[find.len() - 1].trim());
    if first.is_empty() || last.is_empty() {
        return Vec::new();
    }
    let spans = line_spans(content);
    let lines: Vec<&str> = spans.iter().map(|(s, e)| &content[*s..*e]).collect();
    let middle_want = find[1..find.len() - 1]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join("\n");
    let mut found: Vec<(f32, usize, usize)> = Vec::new();
    for i in 0..lines.len() {
        if lines[i].trim() != first {
            continue;
        }
        if let Some(j) = (i + 2..lines.len()).find(|&j| lines[j].trim() == last) {
            let middle = lines[i + 1..j]
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join("\n");
            let ratio =
                similar::TextDiff::from_chars(middle.as_str(), middle_want.as_str()).ratio();
            if ratio >= BLOCK_SIMILARITY {
                found.push((ratio, i, j));
            }
        }
    }
    // The most similar block first.
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    found
        .into_iter()
        .map(|(_, i, j)| &content[spans[i].0..spans[j].1])
        .collect()
}

/// Applies the replacement to `content` (LF text). Returns the new text, how it matched and
/// how many places changed.
pub fn replace(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, &'static str, usize), ToolError> {
    if old == new {
        return Err(ToolError::new(
            "oldString and newString are the same; nothing to change",
        ));
    }
    if old.is_empty() {
        return Err(ToolError::new(
            "oldString is empty; use write to replace a whole file, or include the text to change",
        ));
    }
    let mut ambiguous = 0;
    for (strategy, found) in candidates(content, old) {
        for candidate in found {
            let count = content.matches(candidate).count();
            if replace_all {
                return Ok((content.replace(candidate, new), strategy, count));
            }
            if count == 1 {
                return Ok((content.replacen(candidate, new, 1), strategy, 1));
            }
            ambiguous = ambiguous.max(count);
        }
    }
    if ambiguous > 1 {
        Err(ToolError::new(format!(
            "found {ambiguous} matches for oldString; include more surrounding lines to pick one, \
             or set replaceAll to change every one"
        )))
    } else {
        Err(ToolError::new(
            "oldString not found in the file; read the file again and copy the text exactly",
        ))
    }
}

impl TypedTool for Edit {
    type Args = Args;
    const NAME: &'static str = "edit";

    fn description(&self, _: &ToolContext) -> String {
        "Replaces oldString with newString in a file. oldString must match one place in the \
         file (copy it from read output, without the line-number prefix) unless replaceAll is \
         set. Small whitespace or indentation differences are tolerated. Read the file first; \
         an edit of a file that changed on disk since you read it is refused."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let mut needs = Vec::new();
        let r = ctx.resolve(&args.file_path, false, &mut needs, Self::NAME)?;
        let display = ctx.display(&r);
        let old = TextFile::from_text(&args.old_string).text;
        let new = TextFile::from_text(&args.new_string).text;
        let (file, from_buffer) = files::read_text(ctx, &r)?;
        if !from_buffer {
            ctx.files.check_fresh(&r.path)?;
        }
        let (preview, _, _) = replace(&file.text, &old, &new, args.replace_all)?;
        needs.push(edit_need(
            Self::NAME,
            &display,
            &r.path,
            &file.text,
            &preview,
        ));
        let replace_all = args.replace_all;
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                // Re-read under the file's lock: another edit may have landed since prepare.
                let lock = ctx.files.lock(&r.path);
                let _guard = lock.lock().await;
                let (file, _) = files::read_text(ctx, &r)?;
                let (text, strategy, count) = replace(&file.text, &old, &new, replace_all)?;
                let in_buffer = files::write_text(ctx, &r, &file.encode(&text)).await?;
                let diff = unified_diff(&display, &file.text, &text);
                Ok(ToolOutput {
                    title: display.clone(),
                    output: format!(
                        "Edited {display}: {count} place{} changed{}.",
                        if count == 1 { "" } else { "s" },
                        if strategy == "exact" {
                            String::new()
                        } else {
                            format!(" (matched {strategy})")
                        }
                    ) + if in_buffer { files::UNSAVED_NOTE } else { "" },
                    metadata: json!({"diff": diff, "strategy": strategy,
                        "edit": super::edit_metadata(&r.path, &file.text, &text)}),
                    files_changed: vec![r.path.clone()],
                    ..Default::default()
                })
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(content: &str, old: &str, new: &str) -> (String, &'static str) {
        let (text, strategy, _) = replace(content, old, new, false).unwrap();
        (text, strategy)
    }

    #[test]
    fn the_fallback_ladder() {
        let code =
            "fn main() {\n    let x = 1;\n    if x > 0 {\n        println!(\"pos\");\n    }\n}\n";
        assert_eq!(ok(code, "let x = 1;", "let x = 2;").1, "exact");
        // Trailing/leading spaces differ.
        let (t, s) = ok(
            code,
            "  let x = 1;   \n    if x > 0 {  ",
            "    let x = 3;\n    if x > 3 {",
        );
        assert_eq!(s, "line-trimmed");
        assert!(t.contains("let x = 3;\n    if x > 3 {"));
        // Inner whitespace differs.
        assert_eq!(
            ok(code, "let  x =   1;", "let x = 4;").1,
            "whitespace-normalised"
        );
        assert_eq!(
            ok(code, "if x  >\t0", "if x > 5").1,
            "whitespace-normalised"
        );
        // Indentation shifted as a whole.
        let shifted = "if x > 0 {\n    println!(\"pos\");\n}";
        let (t, s) = ok(code, shifted, "if x > 0 {\n    println!(\"yes\");\n}");
        assert!(matches!(s, "line-trimmed" | "indentation-flexible"), "{s}");
        assert!(t.contains("println!(\"yes\")"));
        // Middle remembered slightly wrong: anchored on first and last lines.
        let (t, s) = ok(
            code,
            "    if x > 0 {\n        println!(\"positive\");\n    }",
            "    if x > 0 {\n        println!(\"changed\");\n    }",
        );
        assert_eq!(s, "block-anchor");
        assert!(t.contains("changed") && !t.contains("\"pos\""));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = replace("a\na\n", "a", "b", false).unwrap_err();
        assert!(e.0.contains("found 2 matches"), "{e}");
        let (t, _, n) = replace("a\na\n", "a", "b", true).unwrap();
        assert_eq!((t.as_str(), n), ("b\nb\n", 2));
        assert!(
            replace("abc", "zzz", "y", false)
                .unwrap_err()
                .0
                .contains("not found")
        );
        assert!(
            replace("abc", "b", "b", false)
                .unwrap_err()
                .0
                .contains("the same")
        );
        assert!(
            replace("abc", "", "x", false)
                .unwrap_err()
                .0
                .contains("empty")
        );
    }

    #[test]
    fn unicode_survives() {
        let (t, _) = ok("名前 = \"🦀\"\nx\n", "名前 = \"🦀\"", "名前 = \"🐍\"");
        assert_eq!(t, "名前 = \"🐍\"\nx\n");
    }
}
