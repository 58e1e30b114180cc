//! The OpenAI chat-completions API: a client that is a [`crate::Reader`], and a router that
//! serves one.

pub(crate) mod client;
pub(crate) mod dto;
pub(crate) mod server;
