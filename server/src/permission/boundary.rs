//! The workspace boundary.
//!
//! Every path a tool touches is made absolute against the workspace root, normalised
//! lexically and checked, then resolved through symlinks (for a path that does not exist
//! yet, through its deepest existing ancestor, and through dangling symlinks too) and checked
//! again. A path is inside only if both checks pass. Anything else needs the
//! `external_directory` permission.
//!
//! The check alone cannot stop a symlink swapped in between check and use; file access
//! inside the workspace therefore goes through [`Boundary::dir`], a capability handle
//! (cap-std, `openat2(RESOLVE_BENEATH)` on Linux) that refuses to leave the root at the
//! moment of use.

use std::io;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution may follow before it is called a loop (as Linux does).
const MAX_SYMLINKS: usize = 40;

#[derive(Debug, Clone)]
pub struct Boundary {
    root: PathBuf,
    root_real: PathBuf,
    /// Folders outside the workspace that tools may read (the tool-output folder).
    readable: Vec<(PathBuf, PathBuf)>,
    home: Option<PathBuf>,
}

/// A path as a tool asked for it, made absolute and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, lexically normalised (`..` and `.` folded, symlinks not followed).
    pub path: PathBuf,
    /// Through every symlink that exists.
    pub real: PathBuf,
    /// Inside the workspace by both checks.
    pub inside: bool,
    /// Inside one of the extra readable folders by both checks.
    pub readable_extra: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BoundaryError {
    #[error("empty path")]
    Empty,
    #[error("{0}: too many levels of symbolic links (a symlink loop)")]
    SymlinkLoop(PathBuf),
}

/// Folds `.` and `..` without touching the file system (`..` at `/` stays at `/`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolves symlinks in an absolute, normalised path, including dangling ones and missing
/// tails: what the kernel would reach if the path were opened or created now.
fn real_path(path: &Path, depth: &mut usize) -> Result<PathBuf, BoundaryError> {
    let mut real = PathBuf::from("/");
    let mut components = path.components().skip(1).peekable(); // skip RootDir
    while let Some(c) = components.next() {
        match c {
            Component::ParentDir => {
                real.pop();
                continue;
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => continue,
            Component::Normal(name) => {
                let candidate = real.join(name);
                match std::fs::symlink_metadata(&candidate) {
                    Ok(md) if md.file_type().is_symlink() => {
                        *depth += 1;
                        if *depth > MAX_SYMLINKS {
                            return Err(BoundaryError::SymlinkLoop(path.to_path_buf()));
                        }
                        let target = std::fs::read_link(&candidate)
                            .map_err(|_| BoundaryError::SymlinkLoop(candidate.clone()))?;
                        let joined = if target.is_absolute() {
                            target
                        } else {
                            real.join(target)
                        };
                        real = real_path(&normalize(&joined), depth)?;
                    }
                    Ok(_) => real = candidate,
                    Err(_) => {
                        // Missing: the rest cannot contain symlinks yet.
                        real = candidate;
                        for rest in components.by_ref() {
                            match rest {
                                Component::ParentDir => {
                                    real.pop();
                                }
                                Component::Normal(n) => real.push(n),
                                _ => {}
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(real)
}

impl Boundary {
    /// A boundary around `root` (which should exist; it is canonicalised when it does).
    pub fn new(root: &Path) -> Self {
        let root = normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()));
        let root_real = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
        Self {
            root,
            root_real,
            readable: Vec::new(),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    /// Lets tools read `dir` (and below) although it is outside the workspace.
    pub fn with_readable(mut self, dir: &Path) -> Self {
        let lexical = normalize(dir);
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| lexical.clone());
        self.readable.push((lexical, real));
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn root_real(&self) -> &Path {
        &self.root_real
    }

    /// Resolves a path given by a tool (relative to the root, absolute, or `~/...`).
    pub fn resolve(&self, input: &str) -> Result<Resolved, BoundaryError> {
        if input.trim().is_empty() {
            return Err(BoundaryError::Empty);
        }
        let expanded = match (input, &self.home) {
            ("~", Some(home)) => home.clone(),
            (s, Some(home)) if s.starts_with("~/") => home.join(&s[2..]),
            (s, _) => PathBuf::from(s),
        };
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            self.root.join(expanded)
        };
        let path = normalize(&absolute);
        let real =
            real_path(&path, &mut 0).map_err(|_| BoundaryError::SymlinkLoop(path.clone()))?;
        let inside = path.starts_with(&self.root) && real.starts_with(&self.root_real);
        let readable_extra = self
            .readable
            .iter()
            .any(|(lexical, real_dir)| path.starts_with(lexical) && real.starts_with(real_dir));
        Ok(Resolved {
            path,
            real,
            inside,
            readable_extra,
        })
    }

    /// The workspace-relative form of a resolved path (for permission patterns and display);
    /// the absolute path for one outside.
    pub fn display(&self, r: &Resolved) -> String {
        match r.path.strip_prefix(&self.root) {
            Ok(rel) if r.inside => {
                let s = rel.to_string_lossy().into_owned();
                if s.is_empty() { ".".into() } else { s }
            }
            _ => r.path.to_string_lossy().into_owned(),
        }
    }

    /// A capability handle on the workspace root: opening through it cannot leave the root,
    /// whatever symlinks appear between check and use.
    pub fn dir(&self) -> io::Result<cap_std::fs::Dir> {
        cap_std::fs::Dir::open_ambient_dir(&self.root_real, cap_std::ambient_authority())
    }

    /// The path of `r` relative to the real root, for use with [`Boundary::dir`].
    pub fn beneath(&self, r: &Resolved) -> Option<PathBuf> {
        r.real.strip_prefix(&self.root_real).ok().map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn normalisation() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/../../x")), PathBuf::from("/x"));
    }

    #[test]
    fn inside_outside_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "x").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        symlink(&outside, root.join("link-out")).unwrap();
        symlink(root.join("src"), root.join("link-in")).unwrap();
        symlink(outside.join("nope"), root.join("dangling-out")).unwrap();
        symlink(root.join("loop2"), root.join("loop1")).unwrap();
        symlink(root.join("loop1"), root.join("loop2")).unwrap();
        let b = Boundary::new(&root);

        let ok = |p: &str| b.resolve(p).unwrap().inside;
        assert!(ok("src/a.rs"));
        assert!(
            ok("src/new/deeper.rs"),
            "missing paths resolve through their ancestors"
        );
        assert!(ok("link-in/a.rs"), "a symlink that stays inside is fine");
        assert!(ok("."));
        assert!(!ok("../outside/x"));
        assert!(!ok("/etc/passwd"));
        assert!(!ok("~/.ssh/id_rsa"));
        assert!(!ok("link-out/x"), "a symlinked folder pointing outside");
        assert!(!ok("dangling-out"), "a dangling symlink pointing outside");
        assert!(!ok("src/../../outside"));
        assert_eq!(
            b.resolve("loop1/x"),
            Err(BoundaryError::SymlinkLoop(root.join("loop1/x")))
        );
        assert_eq!(b.display(&b.resolve("src/./a.rs").unwrap()), "src/a.rs");
        assert_eq!(b.display(&b.resolve("/etc/hosts").unwrap()), "/etc/hosts");
        assert!(b.resolve("").is_err());
    }

    #[test]
    fn extra_readable_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let out = dir.path().join("tool-output");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let b = Boundary::new(&root).with_readable(&out);
        let r = b.resolve(out.join("t1.txt").to_str().unwrap()).unwrap();
        assert!(!r.inside && r.readable_extra);
    }
}
