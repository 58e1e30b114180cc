//! The OpenAI chat-completions API: its wire format, and a client that is a [`crate::Reader`]
//! (the router that serves one is the server crate's).

pub(crate) mod client;
pub(crate) mod dto;
