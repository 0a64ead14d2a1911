//! Model providers. So far: the model script format shared by the `scripted` provider and the
//! `fake-llm` test server.

pub mod script;
