//! File access for tools: through the editor's buffer when the file is open, through the
//! boundary's capability handle inside the workspace (so a symlink swapped in after the check
//! cannot lead outside), and plainly for paths outside that a permission allowed.
//! Also text decoding that keeps a file's BOM and line endings.

use std::path::Path;

use super::{ToolContext, ToolError};
use crate::editor::{BufferEdit, FileOperation};
use crate::permission::boundary::Resolved;

const BOM: &str = "\u{feff}";

/// A text file as tools see it: LF line endings, no BOM, and how to put both back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    pub text: String,
    pub bom: bool,
    pub crlf: bool,
}

impl TextFile {
    pub fn decode(bytes: &[u8], display: &str) -> Result<Self, ToolError> {
        if looks_binary(bytes) {
            return Err(ToolError::new(format!(
                "{display} is a binary file ({} bytes); it cannot be shown as text",
                bytes.len()
            )));
        }
        let raw = std::str::from_utf8(bytes)
            .map_err(|_| ToolError::new(format!("{display} is not valid UTF-8 text")))?;
        Ok(Self::from_text(raw))
    }

    pub fn from_text(raw: &str) -> Self {
        let (bom, body) = match raw.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let crlf = body.contains("\r\n");
        let text = if crlf {
            body.replace("\r\n", "\n")
        } else {
            body.to_string()
        };
        Self { text, bom, crlf }
    }

    /// `text` (LF endings) in this file's encoding.
    pub fn encode(&self, text: &str) -> String {
        let body = if self.crlf {
            text.replace("\r\n", "\n").replace('\n', "\r\n")
        } else {
            text.to_string()
        };
        if self.bom {
            format!("{BOM}{body}")
        } else {
            body
        }
    }
}

/// NUL bytes, or a high share of control bytes, in the first 8 KiB.
pub fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return true;
    }
    let control = head
        .iter()
        .filter(|b| **b < 9 || (**b > 13 && **b < 32))
        .count();
    !head.is_empty() && control * 10 > head.len()
}

/// Common image formats, named so the model gets a clear message.
pub fn image_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "PNG image",
        "jpg" | "jpeg" => "JPEG image",
        "gif" => "GIF image",
        "webp" => "WebP image",
        "bmp" => "BMP image",
        "ico" => "icon",
        "pdf" => "PDF document",
        _ => return None,
    })
}

fn not_found(ctx: &ToolContext, r: &Resolved) -> ToolError {
    ToolError::new(format!("file not found: {}", ctx.display(r)))
}

/// The largest file the tools read whole.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Refuses what is not a regular file (reading a FIFO waits for a writer forever, a device
/// like /dev/zero never ends) and files too big to read whole.
fn readable(ctx: &ToolContext, r: &Resolved, is_file: bool, len: u64) -> std::io::Result<()> {
    if !is_file {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file (a FIFO, device, socket or folder): it is not read",
            ctx.display(r)
        )));
    }
    if len > MAX_READ_BYTES {
        return Err(std::io::Error::other(format!(
            "{} is {} MB, more than the {} MB a tool reads whole",
            ctx.display(r),
            len / (1024 * 1024),
            MAX_READ_BYTES / (1024 * 1024)
        )));
    }
    Ok(())
}

/// The bytes of a file on disk (a regular file, checked first).
pub fn read_bytes(ctx: &ToolContext, r: &Resolved) -> Result<Vec<u8>, ToolError> {
    let result = match ctx.boundary.beneath(r).filter(|_| r.inside) {
        Some(rel) => {
            let dir = ctx.boundary.dir()?;
            dir.metadata(&rel).and_then(|md| {
                readable(ctx, r, md.is_file(), md.len())?;
                dir.read(&rel)
            })
        }
        None => std::fs::metadata(&r.path).and_then(|md| {
            readable(ctx, r, md.is_file(), md.len())?;
            std::fs::read(&r.path)
        }),
    };
    result.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => not_found(ctx, r),
        std::io::ErrorKind::Other => ToolError::new(e.to_string()),
        _ => ToolError::new(format!("cannot read {}: {e}", ctx.display(r))),
    })
}

/// The current text of a file: the editor's unsaved buffer if open, else the disk.
/// Returns the text and whether it came from the buffer.
pub fn read_text(ctx: &ToolContext, r: &Resolved) -> Result<(TextFile, bool), ToolError> {
    if let Some(buffer) = ctx.editor.buffer_text(&r.path) {
        return Ok((TextFile::from_text(&buffer), true));
    }
    let bytes = read_bytes(ctx, r)?;
    Ok((TextFile::decode(&bytes, &ctx.display(r))?, false))
}

/// Writes bytes to disk, creating parent folders.
pub fn write_bytes(ctx: &ToolContext, r: &Resolved, bytes: &[u8]) -> Result<(), ToolError> {
    let fail = |e: std::io::Error| ToolError::new(format!("cannot write {}: {e}", ctx.display(r)));
    match ctx.boundary.beneath(r).filter(|_| r.inside) {
        Some(rel) => {
            let dir = ctx.boundary.dir().map_err(fail)?;
            if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                dir.create_dir_all(parent).map_err(fail)?;
            }
            let existing = dir.symlink_metadata(&rel).ok();
            // Opening a FIFO for writing waits for a reader forever.
            if existing.as_ref().is_some_and(|md| !md.is_file()) {
                return Err(fail(std::io::Error::other("not a regular file")));
            }
            // A file with more than one link shares its content with another path, perhaps
            // outside the workspace: it is replaced (a new file beside it, renamed over it),
            // never written into.
            if let Some(md) = existing.filter(|md| cap_std::fs::MetadataExt::nlink(md) > 1) {
                let name = rel.file_name().unwrap_or_default().to_string_lossy();
                let fresh = rel.with_file_name(format!(".{name}.agent-lsp-{}", std::process::id()));
                dir.write(&fresh, bytes).map_err(fail)?;
                dir.set_permissions(&fresh, md.permissions())
                    .map_err(fail)?;
                return dir.rename(&fresh, &dir, &rel).map_err(fail);
            }
            dir.write(&rel, bytes).map_err(fail)
        }
        None => {
            if let Some(parent) = r.path.parent() {
                std::fs::create_dir_all(parent).map_err(fail)?;
            }
            std::fs::write(&r.path, bytes).map_err(fail)
        }
    }
}

/// Writes new text to a file: to the editor's buffer when the file is open there (one undo
/// step in the editor), else to disk. Records the file as known to the agent. Returns
/// whether it went into a buffer.
pub async fn write_text(ctx: &ToolContext, r: &Resolved, text: &str) -> Result<bool, ToolError> {
    let in_buffer = match ctx.editor.apply_to_buffer(&r.path, text).await {
        BufferEdit::Applied => true,
        BufferEdit::Rejected(why) => {
            return Err(ToolError::new(format!(
                "the editor did not apply the change to {}: {why}",
                ctx.display(r)
            )));
        }
        BufferEdit::NotOpen => {
            write_bytes(ctx, r, text.as_bytes())?;
            false
        }
    };
    ctx.files.remember(&r.path);
    Ok(in_buffer)
}

/// What the model should know after a change that went into an open, unsaved buffer.
pub const UNSAVED_NOTE: &str = " The file is open in the editor: the change is in its buffer, \
not saved yet, so commands you run still see the old file on disk until the user saves.";

pub fn remove_file(ctx: &ToolContext, r: &Resolved) -> Result<(), ToolError> {
    let result = match ctx.boundary.beneath(r).filter(|_| r.inside) {
        Some(rel) => ctx.boundary.dir()?.remove_file(&rel),
        None => std::fs::remove_file(&r.path),
    };
    result.map_err(|e| ToolError::new(format!("cannot delete {}: {e}", ctx.display(r))))
}

/// Creates a new file with `bytes`: through the editor when it takes new files (the
/// creation and the text are one change in its undo; the text then sits in its buffer,
/// unsaved), else announced to it as a resource operation and written to disk. Returns
/// whether the text went into a buffer.
pub async fn create(ctx: &ToolContext, r: &Resolved, bytes: &[u8]) -> Result<bool, ToolError> {
    let op = FileOperation::Create {
        path: r.path.clone(),
        text: std::str::from_utf8(bytes).ok().map(String::from),
    };
    let in_buffer = match ctx.editor.file_operation(&op).await {
        BufferEdit::Rejected(why) => {
            return Err(ToolError::new(format!(
                "the editor did not create {}: {why}",
                ctx.display(r)
            )));
        }
        BufferEdit::Applied => true,
        // Not taken, or only announced (binary content): the bytes go to disk.
        BufferEdit::NotOpen => {
            write_bytes(ctx, r, bytes)?;
            false
        }
    };
    ctx.files.remember(&r.path);
    Ok(in_buffer)
}

/// Deletes a file: through the editor when it supports resource operations (its buffer
/// closes with it), else on disk.
pub async fn delete(ctx: &ToolContext, r: &Resolved) -> Result<(), ToolError> {
    let op = FileOperation::Delete {
        path: r.path.clone(),
    };
    match ctx.editor.file_operation(&op).await {
        BufferEdit::Applied => Ok(()),
        BufferEdit::Rejected(why) => Err(ToolError::new(format!(
            "the editor did not delete {}: {why}",
            ctx.display(r)
        ))),
        BufferEdit::NotOpen => remove_file(ctx, r),
    }
}

/// Renames a file: through the editor when it supports resource operations (open buffers
/// follow), else on disk.
pub async fn rename(ctx: &ToolContext, from: &Resolved, to: &Resolved) -> Result<(), ToolError> {
    let op = FileOperation::Rename {
        from: from.path.clone(),
        to: to.path.clone(),
    };
    let fail = |e: String| {
        ToolError::new(format!(
            "cannot move {} to {}: {e}",
            ctx.display(from),
            ctx.display(to)
        ))
    };
    match ctx.editor.file_operation(&op).await {
        BufferEdit::Applied => Ok(()),
        BufferEdit::Rejected(why) => Err(fail(why)),
        BufferEdit::NotOpen => {
            let (Some(a), Some(b)) = (
                ctx.boundary.beneath(from).filter(|_| from.inside),
                ctx.boundary.beneath(to).filter(|_| to.inside),
            ) else {
                if let Some(parent) = to.path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
                }
                return std::fs::rename(&from.path, &to.path).map_err(|e| fail(e.to_string()));
            };
            let dir = ctx.boundary.dir().map_err(|e| fail(e.to_string()))?;
            if let Some(parent) = b.parent().filter(|p| !p.as_os_str().is_empty()) {
                dir.create_dir_all(parent)
                    .map_err(|e| fail(e.to_string()))?;
            }
            dir.rename(&a, &dir, &b).map_err(|e| fail(e.to_string()))
        }
    }
}

pub fn exists(r: &Resolved) -> bool {
    std::fs::symlink_metadata(&r.path).is_ok()
}
