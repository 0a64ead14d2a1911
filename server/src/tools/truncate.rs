//! Cutting long tool results. Over 2,000 lines or 50 KiB, the model gets the head (and the
//! tail, for command output), a line saying how much was cut, and the path of a file holding
//! the full output, which the read and grep tools may open although it is outside the
//! workspace. Saved outputs older than 7 days are removed.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 50 * 1024;
pub const KEEP_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// The tool-output folder under the data directory.
pub fn output_dir() -> PathBuf {
    crate::paths::data_dir().join("tool-output")
}

/// The first lines of `text` within half (or all, without a tail) of both limits.
fn head(text: &str, max_lines: usize, max_bytes: usize) -> &str {
    let mut end = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if n >= max_lines || end + line.len() > max_bytes {
            break;
        }
        end += line.len();
    }
    &text[..end]
}

fn tail(text: &str, max_lines: usize, max_bytes: usize) -> &str {
    let mut start = text.len();
    for (n, line) in text.split_inclusive('\n').rev().enumerate() {
        if n >= max_lines || text.len() - start + line.len() > max_bytes {
            break;
        }
        start -= line.len();
    }
    &text[start..]
}

/// The most bytes one result may take in a window whose input may use `usable_input`
/// tokens: about half of it (a token is some four bytes), within 1 KiB and [`MAX_BYTES`] —
/// one output must never fill a small local model's window.
pub fn limit_for(usable_input: u32) -> usize {
    (usable_input as usize * 2).clamp(1024, MAX_BYTES)
}

/// `text` if within [`MAX_LINES`] and `max_bytes`; else the cut version, with the full
/// text saved.
pub fn truncate(
    text: &str,
    keep_tail: bool,
    max_bytes: usize,
    dir: &Path,
    call_id: &str,
) -> String {
    let lines = text.lines().count();
    if lines <= MAX_LINES && text.len() <= max_bytes {
        return text.to_string();
    }
    let saved = save(text, dir, call_id);
    let (h, t) = if keep_tail {
        let h = head(text, MAX_LINES / 2, max_bytes / 2);
        let t = tail(&text[h.len()..], MAX_LINES / 2, max_bytes / 2);
        (h, t)
    } else {
        (head(text, MAX_LINES, max_bytes), "")
    };
    let kept_lines = h.lines().count() + t.lines().count();
    let cut_lines = lines.saturating_sub(kept_lines);
    let cut_bytes = text.len() - h.len() - t.len();
    let where_ = match &saved {
        Ok(path) => format!(
            "The full output is in {} (use read with offset/limit, or grep, to see the rest).",
            path.display()
        ),
        Err(e) => format!("(the full output could not be saved: {e})"),
    };
    let note = format!("\n… {cut_lines} lines ({cut_bytes} bytes) cut. {where_}\n");
    let mut out = String::with_capacity(h.len() + note.len() + t.len());
    out.push_str(h);
    if !h.ends_with('\n') && !h.is_empty() {
        out.push('\n');
    }
    out.push_str(&note);
    out.push_str(t);
    out
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced: safe as a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn save(text: &str, dir: &Path, call_id: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(
        "{}-{}.txt",
        crate::store::new_id(),
        file_safe(call_id)
    ));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Keeps the whole output of call `call_id` under a name of its own (written once, so the
/// same call always names the same file): for outputs the request shows as a stub.
pub fn keep_whole(text: &str, dir: &Path, call_id: &str) -> std::io::Result<PathBuf> {
    let path = dir.join(format!("stubbed-{}.txt", file_safe(call_id)));
    if !path.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::write(&path, text)?;
    }
    Ok(path)
}

/// Removes saved outputs older than [`KEEP_FOR`]; returns how many were removed.
pub fn cleanup(dir: &Path, now: SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .map(|t| now.duration_since(t).unwrap_or_default() > KEEP_FOR)
                .unwrap_or(false)
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Cleans the tool-output folder now and then every hour, in the background.
pub fn spawn_cleanup() {
    tokio::spawn(async {
        loop {
            let dir = output_dir();
            let removed = tokio::task::spawn_blocking(move || cleanup(&dir, SystemTime::now()))
                .await
                .unwrap_or(0);
            if removed > 0 {
                tracing::info!(removed, "removed old tool outputs");
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            truncate("a\nb\n", true, MAX_BYTES, dir.path(), "c"),
            "a\nb\n"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_saves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let cut = truncate(&text, true, MAX_BYTES, dir.path(), "call/1");
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.ends_with("line 9999\n"));
        assert!(cut.lines().count() <= MAX_LINES + 2);
        assert!(cut.len() <= MAX_BYTES + 300);
        assert!(cut.contains("lines ("), "{}", &cut[..200]);
        let saved: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(saved.len(), 1);
        assert_eq!(std::fs::read_to_string(saved[0].path()).unwrap(), text);
        assert!(cut.contains(&saved[0].path().display().to_string()));
    }

    #[test]
    fn a_small_window_gets_a_smaller_cut() {
        assert_eq!(limit_for(200_000), MAX_BYTES);
        assert_eq!(limit_for(100), 1024);
        assert_eq!(limit_for(2_048), 4_096);
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let cut = truncate(&text, false, limit_for(2_048), dir.path(), "c");
        assert!(cut.len() <= 4_096 + 300, "{}", cut.len());
        assert!(cut.starts_with("line 0\n"));
    }

    #[test]
    fn one_huge_line_is_cut_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let text = "x".repeat(200_000);
        let cut = truncate(&text, false, MAX_BYTES, dir.path(), "c");
        assert!(
            cut.len() < 1000,
            "no whole line fits; only the note remains"
        );
        assert!(cut.contains("200000 bytes"));
    }

    #[test]
    fn cleanup_removes_only_old_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.txt"), "x").unwrap();
        std::fs::write(dir.path().join("new.txt"), "x").unwrap();
        let future = SystemTime::now() + KEEP_FOR + Duration::from_secs(60);
        let old = std::fs::File::options()
            .write(true)
            .open(dir.path().join("old.txt"))
            .unwrap();
        old.set_modified(SystemTime::now() - KEEP_FOR - Duration::from_secs(60))
            .unwrap();
        assert_eq!(cleanup(dir.path(), SystemTime::now()), 1);
        assert!(dir.path().join("new.txt").exists());
        assert_eq!(cleanup(dir.path(), future), 1);
    }
}
