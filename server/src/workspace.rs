//! Finding the workspace a file belongs to when the client names none (Helix without a
//! `.git` sends a null `rootUri` and no folders).

use std::path::{Path, PathBuf};

/// Folder entries that mark a project root, nearest first.
const MARKERS: &[&str] = &[".git", ".jj", ".svn", ".hg", ".helix", ".agent-lsp.toml"];

/// The nearest folder above `file` holding a root marker, else the file's own folder.
pub fn root_for_file(file: &Path) -> PathBuf {
    let file = &crate::permission::boundary::normalize(file);
    let folder = if file.is_dir() {
        file
    } else {
        file.parent().unwrap_or(file)
    };
    folder
        .ancestors()
        .find(|dir| MARKERS.iter().any(|m| dir.join(m).exists()))
        .unwrap_or(folder)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Neovim plugin finds roots with the same markers (so both agree on a workspace).
    #[test]
    fn the_neovim_plugin_uses_the_same_markers() {
        let init = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../editors/nvim/lua/agent_lsp/init.lua"
        );
        let text = std::fs::read_to_string(init).unwrap();
        let quoted: Vec<String> = MARKERS.iter().map(|m| format!("\"{m}\"")).collect();
        let want = format!("root_markers = {{ {} }},", quoted.join(", "));
        assert!(text.contains(&want), "{init} should have `{want}`");
    }

    #[test]
    fn nearest_marker_else_the_files_folder() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("p");
        std::fs::create_dir_all(project.join(".jj")).unwrap();
        std::fs::create_dir_all(project.join("src/deep")).unwrap();
        let file = project.join("src/deep/a.rs");
        std::fs::write(&file, "").unwrap();
        assert_eq!(root_for_file(&file), project);

        let loose = dir.path().join("loose/b.txt");
        std::fs::create_dir_all(loose.parent().unwrap()).unwrap();
        assert_eq!(root_for_file(&loose), dir.path().join("loose"));
        assert_eq!(
            root_for_file(&dir.path().join("loose/.")),
            dir.path().join("loose")
        );
    }
}
