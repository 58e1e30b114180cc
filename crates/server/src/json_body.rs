//! Request bodies: bounded in size, parsed as JSON, every failure mapped to a 4xx naming the field.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::{ApiError, AppState};

/// A JSON request body of type `T`. Unlike `axum::Json` it rejects with [`ApiError`], whose body
/// names the path of the offending field (`turns[3].time`), and it does not require a
/// `Content-Type` header.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::BodyTooLarge { limit_bytes: state.config().body_limit_bytes }
            } else {
                ApiError::MalformedJson { field: None, message: rejection.body_text() }
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as one JSON value of type `T` (trailing data refused), mapping syntax errors to
/// [`ApiError::MalformedJson`] and shape errors to [`ApiError::InvalidField`] with the field path.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Serde would read a struct from an array too (`[[...]]` as `{"turns": [...]}`); every body
    // of this API is an object, so anything else that is valid JSON is refused as a whole.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|&b| b != b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = render_path(err.path());
        let inner = err.into_inner();
        classify(&path, &inner)
    })?;
    de.end().map_err(|err| classify(".", &err))?;
    Ok(value)
}

fn classify(path: &str, err: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let message = err.to_string();
    match err.classify() {
        Category::Data => ApiError::InvalidField { field: field_path(path, &message), message },
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::MalformedJson { field: (path != ".").then(|| path.to_owned()), message }
        }
    }
}

/// The field to blame: serde reports missing and unknown fields at their parent, so their name is
/// appended to the path.
fn field_path(path: &str, message: &str) -> String {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix)?.split('`').next())
        .map(key_name);
    match named {
        Some(name) if path == "." => name,
        Some(name) if !path.ends_with(&name) => format!("{path}.{name}"),
        _ if path == "." => "body".to_owned(),
        _ => path.to_owned(),
    }
}

/// A path as serde_path_to_error writes it (`turns[3].time`, `.` for the root), except that a
/// key which is the empty string is written `""` rather than as nothing.
fn render_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key_name(key));
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    if out.is_empty() { ".".to_owned() } else { out }
}

/// A key as an error names it: one that is empty or holds characters JSON escapes (control
/// characters, quotes) in its JSON form (`""`, `"a\fb"`), as written in the body.
fn key_name(key: &str) -> String {
    let json_form = serde_json::to_string(key).expect("a string serialises");
    if key.is_empty() || json_form[1..json_form.len() - 1] != *key {
        json_form
    } else {
        key.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "fields exist to be deserialized")]
    struct Outer {
        items: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "fields exist to be deserialized")]
    struct Inner {
        n: u32,
        s: String,
    }

    #[track_caller]
    fn check(body: &str, status: StatusCode, field: Option<&str>) {
        let err = parse_json::<Outer>(body.as_bytes()).expect_err("must be refused");
        assert_eq!((err.status(), err.field()), (status, field), "{err}");
    }

    #[test]
    fn errors_name_the_field_path() {
        let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
        check(
            r#"{"items":[{"n":1,"s":"a"},{"n":"x","s":"b"}]}"#,
            unprocessable,
            Some("items[1].n"),
        );
        check(r#"{"items":[{"n":1}]}"#, unprocessable, Some("items[0].s"));
        check(r#"{"items":[{"n":1,"s":"a","zz":0}]}"#, unprocessable, Some("items[0].zz"));
        check(r#"{}"#, unprocessable, Some("items"));
        check(r#"[]"#, unprocessable, Some("body"));
        check(r#"[[{"n":1,"s":"a"}]]"#, unprocessable, Some("body"));
        check(r#"7"#, unprocessable, Some("body"));
        check(r#"{"items":[{"n":1,"s":"a"}"#, StatusCode::BAD_REQUEST, Some("items"));
        check(r#"{"items":[]} trailing"#, StatusCode::BAD_REQUEST, None);
        check("", StatusCode::BAD_REQUEST, None);
        // Found by fuzzing (fuzz/regressions/http_bodies): a key that is the empty string gave a
        // 422 whose field was empty.
        check(r#"{"":1}"#, unprocessable, Some(r#""""#));
        check(r#"{"items":[{"n":1,"s":"a","":0}]}"#, unprocessable, Some(r#"items[0]."""#));
        check(r#"{"",:1}"#, unprocessable, Some(r#""""#));
        check(r#"{"items":[{"n":1,"s":"a","z\f":0}]}"#, unprocessable, Some(r#"items[0]."z\f""#));
        assert!(parse_json::<Outer>(br#" {"items":[{"n":7,"s":""}]} "#).is_ok());
    }
}
