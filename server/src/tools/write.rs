//! `write`: creates or overwrites a file. Overwriting keeps the file's BOM and line endings.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::files::{self, TextFile};
use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool, edit_need};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// The file to write (relative to the workspace root, or absolute).
    pub file_path: String,
    /// The whole new content of the file.
    pub content: String,
}

pub struct Write;

impl TypedTool for Write {
    type Args = Args;
    const NAME: &'static str = "write";

    fn description(&self, _: &ToolContext) -> String {
        "Writes a whole file, creating it (and its folders) or replacing it. Prefer `edit` for \
         changes to an existing file (`write` resends the whole text). An existing file keeps its line endings and BOM."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let mut needs = Vec::new();
        let r = ctx.resolve(&args.file_path, false, &mut needs, Self::NAME)?;
        if r.real.is_dir() {
            return Err(ToolError::new(format!("{} is a folder", ctx.display(&r))));
        }
        let display = ctx.display(&r);
        let existing = if files::exists(&r) {
            Some(files::read_text(ctx, &r)?.0)
        } else {
            None
        };
        let old = existing
            .as_ref()
            .map(|f| f.text.clone())
            .unwrap_or_default();
        let new_text = TextFile::from_text(&args.content).text;
        needs.push(edit_need(Self::NAME, &display, &r.path, &old, &new_text));
        let encoded = match &existing {
            Some(file) => file.encode(&new_text),
            None => args.content,
        };
        let created = existing.is_none();
        let edit = super::edit_metadata(&r.path, &old, &new_text);
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                let in_buffer = if created {
                    files::create(ctx, &r, encoded.as_bytes()).await?
                } else {
                    files::write_text(ctx, &r, &encoded).await?
                };
                Ok(ToolOutput {
                    title: display.clone(),
                    output: format!(
                        "{} {display} ({} lines).{}",
                        if created { "Created" } else { "Wrote" },
                        new_text.lines().count(),
                        if in_buffer { files::UNSAVED_NOTE } else { "" }
                    ),
                    metadata: json!({"created": created, "edit": edit}),
                    files_changed: vec![r.path.clone()],
                    ..Default::default()
                })
            })
        }))
    }
}
