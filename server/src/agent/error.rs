//! What the agent's operations fail with. Each kind has a class and a reason word
//! ([`AgentError::class`]); the LSP and ACP surfaces turn those into JSON-RPC errors
//! (`lsp::error`, `acp`), the CLI prints the message.

use crate::snapshot::SnapshotError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session (or a message in it) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request's arguments are wrong (an empty fact, a tier without its time to live).
    #[error("{0}")]
    Invalid(String),
    /// A turn of the session runs: the action has to wait for it or cancel it.
    #[error("{0}")]
    Busy(String),
    /// The action makes no sense in the session's state (nothing to undo, snapshots off, a
    /// compaction with nothing to fold, a model that failed to summarise).
    #[error("{0}")]
    Refused(String),
    /// No model is configured, or its configuration is wrong.
    #[error("{0}")]
    NoModel(String),
    /// An instruction file could not be read for the baseline.
    #[error("{0}")]
    Baseline(String),
    #[error("cannot record the session: {0}")]
    Store(#[from] StoreError),
    #[error("snapshot: {0}")]
    Snapshot(#[from] SnapshotError),
    /// Work on a blocking thread died (a panic there).
    #[error("{0}")]
    Internal(String),
}

pub type Result<T> = std::result::Result<T, AgentError>;

impl From<crate::facts::FactError> for AgentError {
    fn from(e: crate::facts::FactError) -> Self {
        use crate::facts::FactError;
        match e {
            FactError::Store(e) => Self::Store(e),
            FactError::Elsewhere(_) => Self::Refused(e.to_string()),
            FactError::Invalid(_) => Self::Invalid(e.to_string()),
            FactError::NotFound(_) => Self::NotFound(e.to_string()),
        }
    }
}

impl From<crate::journal::JournalError> for AgentError {
    fn from(e: crate::journal::JournalError) -> Self {
        use crate::journal::JournalError;
        match e {
            JournalError::Store(e) => Self::Store(e),
            JournalError::Invalid(_) => Self::Invalid(e.to_string()),
            JournalError::NotFound(_) => Self::NotFound(e.to_string()),
            JournalError::Io { .. } | JournalError::Unreadable { .. } => {
                Self::Refused(e.to_string())
            }
        }
    }
}

/// Whose fault an error is, for a protocol's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request is wrong: a missing session, bad arguments.
    InvalidParams,
    /// The request was fine but could not be carried out now.
    Failed,
    /// The database, the snapshots or a worker failed.
    Internal,
}

impl AgentError {
    /// The class and the reason word (`data.reason` on the wire).
    pub fn class(&self) -> (ErrorClass, &'static str) {
        match self {
            Self::NotFound(_) => (ErrorClass::InvalidParams, "not_found"),
            Self::Invalid(_) => (ErrorClass::InvalidParams, "invalid"),
            Self::Busy(_) => (ErrorClass::Failed, "busy"),
            Self::Refused(_) => (ErrorClass::Failed, "refused"),
            Self::NoModel(_) => (ErrorClass::Failed, "no_model"),
            Self::Baseline(_) => (ErrorClass::Failed, "baseline"),
            Self::Store(_) | Self::Snapshot(_) | Self::Internal(_) => {
                (ErrorClass::Internal, "internal")
            }
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound(what.into())
    }

    pub fn refused(why: impl Into<String>) -> Self {
        Self::Refused(why.into())
    }
}
