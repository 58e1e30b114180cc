//! Chat messages: what every reader is given.

use serde::{Deserialize, Serialize};

/// Who speaks a message.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions.
    System,
    /// The asker.
    User,
    /// The model.
    Assistant,
}

/// One message of a chat.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: ChatRole,
    /// The text, verbatim.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::System, content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::User, content: content.into() }
    }
}
