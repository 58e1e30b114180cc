//! Who is calling: the bearer key resolved to its scope, and the namespace check.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use evicortex::Namespace;

use crate::{ApiError, AppState, KeyScope};

/// The authenticated caller of a request: the scope of its `Authorization: Bearer` key.
#[derive(Debug, Clone)]
pub struct Caller(pub KeyScope);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).ok_or(ApiError::MissingKey)?;
        let secret = bearer_token(header.as_bytes()).ok_or(ApiError::InvalidKey)?.to_owned();
        let state = state.clone();
        let scope = tokio::task::spawn_blocking(move || state.keys().scope_of(&secret))
            .await
            .map_err(|e| ApiError::Storage { message: format!("key lookup task: {e}") })?
            // A database out of reach is 503, as for every other request that needs it.
            .map_err(|e| crate::facade_error(&e))?;
        scope.map(Caller).ok_or(ApiError::InvalidKey)
    }
}

impl Caller {
    /// The namespace named by the path segment `raw`, if this caller may use it.
    ///
    /// A namespace key asking for any other namespace gets [`ApiError::NamespaceForbidden`]
    /// before anything is looked up, so the answer is the same whether that namespace exists,
    /// is empty or is not even a valid name.
    pub fn namespace(&self, raw: &str) -> Result<Namespace, ApiError> {
        match &self.0 {
            KeyScope::Namespace(own) if own.as_str() == raw => Ok(own.clone()),
            KeyScope::Namespace(_) => Err(ApiError::NamespaceForbidden),
            KeyScope::Admin => Namespace::new(raw).map_err(|e| ApiError::invalid("namespace", e)),
        }
    }

    /// Succeeds only for admin keys.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self.0 {
            KeyScope::Admin => Ok(()),
            KeyScope::Namespace(_) => Err(ApiError::AdminOnly),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header value (scheme case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_tokens_only() {
        assert_eq!(bearer_token(b"Bearer evk_abc"), Some("evk_abc"));
        assert_eq!(bearer_token(b"bearer  evk_abc "), Some("evk_abc"));
        assert_eq!(bearer_token(b"Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"evk_abc"), None);
        assert_eq!(bearer_token(&[0xff, b' ', b'a']), None);
    }

    #[test]
    fn namespace_keys_get_the_same_refusal_for_any_other_namespace() {
        let caller = Caller(KeyScope::Namespace(Namespace::new("alice").expect("valid")));
        assert_eq!(caller.namespace("alice").expect("own").as_str(), "alice");
        for other in ["bob", "no-such-namespace", "bad/name", ""] {
            assert!(
                matches!(caller.namespace(other), Err(ApiError::NamespaceForbidden)),
                "{other}"
            );
        }
        assert!(matches!(caller.require_admin(), Err(ApiError::AdminOnly)));
        let admin = Caller(KeyScope::Admin);
        assert!(admin.namespace("bob").is_ok());
        assert!(matches!(admin.namespace("bad/name"), Err(ApiError::InvalidField { .. })));
    }
}
