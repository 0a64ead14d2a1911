//! Memory facts (the memory that decides for itself what to remember and what to show):
//! written by the model or the user, consolidated by a dream, surfaced when a prompt is
//! about them. Built in parts; so far the lexical surface pipeline (`surface.rs`) and its
//! DEV benchmark (`dev.rs`). The store, the tools, the dream and the editors' inspector are
//! to come (issue 16).

pub mod dev;
pub mod surface;
