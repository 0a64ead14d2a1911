//! Where agent-lsp keeps its files: XDG base directories, overridable for tests.

use std::path::PathBuf;

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn non_empty_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$AGENT_LSP_DATA_DIR`, else `$XDG_DATA_HOME/agent-lsp`, else `~/.local/share/agent-lsp`.
pub fn data_dir() -> PathBuf {
    non_empty_env("AGENT_LSP_DATA_DIR").unwrap_or_else(|| {
        non_empty_env("XDG_DATA_HOME")
            .unwrap_or_else(|| home().join(".local/share"))
            .join("agent-lsp")
    })
}

/// `$XDG_CONFIG_HOME/agent-lsp`, else `~/.config/agent-lsp`.
pub fn config_dir() -> PathBuf {
    non_empty_env("XDG_CONFIG_HOME")
        .unwrap_or_else(|| home().join(".config"))
        .join("agent-lsp")
}

/// The SQLite database shared by every server process of this user.
pub fn database_path() -> PathBuf {
    data_dir().join("agent-lsp.db")
}

/// The user's config file.
pub fn user_config_file() -> PathBuf {
    config_dir().join("config.toml")
}

/// The name of a workspace's own config file, at its root.
pub const WORKSPACE_CONFIG_FILE: &str = ".agent-lsp.toml";

/// The folder agent-lsp keeps in a workspace (project memory; skills a user adds).
pub const WORKSPACE_DIR: &str = ".agent-lsp";

/// Creates `<workspace>/.agent-lsp/<sub>` for files of ours. A folder we create ignores itself
/// with a `.gitignore` of `*` (git then shows none of it), so the user's `.git` and
/// `.gitignore` are never written. When `.agent-lsp/` already exists (the user's own, for
/// skills), the new subfolder ignores itself instead.
pub fn ensure_workspace_dir(workspace: &std::path::Path, sub: &str) -> std::io::Result<PathBuf> {
    let top = workspace.join(WORKSPACE_DIR);
    let dir = top.join(sub);
    if dir.is_dir() {
        return Ok(dir);
    }
    let ignoring = if top.is_dir() { dir.clone() } else { top };
    std::fs::create_dir_all(&dir)?;
    let ignore = ignoring.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(ignore, "# agent-lsp's own files: kept out of git\n*\n")?;
    }
    Ok(dir)
}

/// Replaces the file at `path` with `text` at once: written to a temporary file beside it
/// (with the old file's permissions), then renamed over it, so a reader never sees half of
/// it and a failure leaves the old one whole. Returns the path of what failed.
pub fn replace_file(
    path: &std::path::Path,
    text: &str,
) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| (tmp.clone(), e))?;
    if let Ok(old) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, old.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        (path.to_path_buf(), e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_folders_ignore_themselves() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ensure_workspace_dir(ws.path(), "memory").unwrap();
        assert!(dir.is_dir());
        let top = ws.path().join(WORKSPACE_DIR);
        assert!(
            std::fs::read_to_string(top.join(".gitignore"))
                .unwrap()
                .ends_with("\n*\n")
        );
        assert!(!dir.join(".gitignore").exists(), "the top one covers it");

        // The user's own .agent-lsp/ (for skills): only our subfolder ignores itself.
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".agent-lsp/skills")).unwrap();
        let dir = ensure_workspace_dir(ws.path(), "memory").unwrap();
        assert!(!ws.path().join(".agent-lsp/.gitignore").exists());
        assert!(dir.join(".gitignore").exists());
        // A user's edit of our .gitignore stays.
        std::fs::write(dir.join(".gitignore"), "# mine\n").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".gitignore"), "# mine\n").unwrap();
        ensure_workspace_dir(ws.path(), "memory").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
            "# mine\n"
        );
    }
}
