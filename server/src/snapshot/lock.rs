//! A lock file that serialises server processes on one hidden repository. It holds the
//! owner's pid: a lock left by a process that no longer exists is taken over; a live owner
//! is waited for, up to a timeout, then reported clearly. Someone else's live lock is never
//! deleted.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Result, SnapshotError};

const WAIT: Duration = Duration::from_secs(15);

pub struct Lock {
    path: PathBuf,
}

fn alive(pid: i32) -> bool {
    // Signal 0 checks existence; EPERM still means it exists.
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

impl Lock {
    pub fn acquire(git_dir: &Path) -> Result<Self> {
        Self::acquire_within(git_dir, WAIT)
    }

    pub fn acquire_within(git_dir: &Path, wait: Duration) -> Result<Self> {
        let path = git_dir.join("agent-lsp.lock");
        let started = Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    let _ = write!(f, "{}", std::process::id());
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|s| s.trim().parse::<i32>().ok());
                    match owner {
                        Some(pid) if !alive(pid) => {
                            tracing::warn!(
                                pid,
                                "taking over a snapshot lock left by a process that is gone"
                            );
                            let _ = std::fs::remove_file(&path);
                            continue;
                        }
                        _ if started.elapsed() >= wait => {
                            return Err(SnapshotError::Other(format!(
                                "the snapshot repository is locked by process {} ({}); try again when it is done",
                                owner
                                    .map(|p| p.to_string())
                                    .unwrap_or_else(|| "unknown".into()),
                                path.display()
                            )));
                        }
                        _ => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
