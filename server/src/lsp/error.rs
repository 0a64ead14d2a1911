//! The one place the agent's errors become JSON-RPC errors.
//!
//! - InvalidParams (-32602): the request names a session, message or fact that does not
//!   exist, or its arguments are wrong.
//! - RequestFailed (-32803, LSP 3.17): a refused action (nothing to undo, snapshots off),
//!   the session busy (`data.reason: "busy"`), no model configured; the message says why.
//! - InternalError (-32603): the database, the snapshot repository or a worker failed.

use serde_json::json;
use tower_lsp_server::jsonrpc::{Error, ErrorCode};

use crate::agent::AgentError;
use crate::agent::error::ErrorClass;

/// LSP's RequestFailed: the request was valid but could not be carried out.
pub const REQUEST_FAILED: i64 = -32803;

pub fn to_rpc(e: AgentError) -> Error {
    let (class, reason) = e.class();
    let code = match class {
        ErrorClass::InvalidParams => ErrorCode::InvalidParams,
        ErrorClass::Failed => ErrorCode::ServerError(REQUEST_FAILED),
        ErrorClass::Internal => ErrorCode::InternalError,
    };
    Error {
        code,
        message: e.to_string().into(),
        data: Some(json!({ "reason": reason })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_code() {
        let code = |e| to_rpc(e).code.code();
        assert_eq!(code(AgentError::not_found("no session x")), -32602);
        assert_eq!(code(AgentError::Invalid("no text".into())), -32602);
        assert_eq!(code(AgentError::Busy("running".into())), REQUEST_FAILED);
        assert_eq!(code(AgentError::refused("nothing to undo")), REQUEST_FAILED);
        let internal = AgentError::Internal("worker died".into());
        let e = to_rpc(internal);
        assert_eq!(e.code.code(), -32603);
        assert_eq!(e.message, "worker died");
    }
}
