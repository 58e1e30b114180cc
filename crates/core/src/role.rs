//! Who said a turn.

use serde::{Deserialize, Serialize};

/// The role of a turn's author in the conversation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human user.
    User,
    /// The assistant model.
    Assistant,
    /// A system or developer message.
    System,
    /// The output of a tool call.
    Tool,
}

/// A role name that is not one of `user`, `assistant`, `system`, `tool`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {given:?}, expected one of user, assistant, system, tool")]
pub struct RoleError {
    /// The text that was given.
    pub given: String,
}

impl Role {
    /// Every role, in canonical order.
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::System, Role::Tool];

    /// The lowercase name used in every file format.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = RoleError;
    fn from_str(s: &str) -> Result<Role, RoleError> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| RoleError { given: s.to_owned() })
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_names_and_refuses_others() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert_eq!("User".parse::<Role>(), Err(RoleError { given: "User".into() }));
    }
}
