//! Connection strings in messages, without their passwords.

/// `url` with any password replaced by `***`: the user info of a `postgres://` URL, a
/// `password=` query parameter, or a `password=` word of a key-value connection string. Errors
/// and logs name the server they concern with this, never with the secret.
pub fn redact_password(url: &str) -> String {
    let url = url.trim();
    for scheme in ["postgres://", "postgresql://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            return format!("{scheme}{}", redact_uri_rest(rest));
        }
    }
    redact_key_value(url)
}

/// What names a store's database, for keying and claiming its derived files: `url` without
/// its password ([`redact_password`]) and without `pool_max`, which changes how a handle
/// connects, not what it connects to.
pub fn database_identity(url: &str) -> String {
    crate::tls_params::without_pool_max(&redact_password(url))
}

/// The part of a URI after its scheme: `user:password@host/db?query`.
fn redact_uri_rest(rest: &str) -> String {
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (user_info, host) = authority.split_at(at);
            match user_info.split_once(':') {
                Some((user, _password)) => format!("{user}:***{host}"),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => p.to_owned(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{authority}{tail}")
}

/// A key-value connection string: `host=... password=secret dbname=...`. A quoted password
/// (`password='a b'`) is replaced up to its closing quote.
fn redact_key_value(conn: &str) -> String {
    let mut out = String::with_capacity(conn.len());
    let mut rest = conn;
    while let Some(found) = find_password_key(rest) {
        out.push_str(&rest[..found.value_start]);
        out.push_str("***");
        let value = &rest[found.value_start..];
        let skip = if let Some(quoted) = value.strip_prefix('\'') {
            let mut end = quoted.len();
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '\'' if !escaped => {
                        end = i + 1;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        rest = &value[skip..];
    }
    out.push_str(rest);
    out
}

struct PasswordKey {
    value_start: usize,
}

/// The next `password=` (spaces allowed around `=`) that starts a word.
fn find_password_key(s: &str) -> Option<PasswordKey> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("password") {
        let start = from + i;
        let at_word_start = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = &s[start + "password".len()..];
        let trimmed = after.trim_start();
        if at_word_start && let Some(value) = trimmed.strip_prefix('=') {
            let value = value.trim_start();
            return Some(PasswordKey { value_start: s.len() - value.len() });
        }
        from = start + "password".len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_the_password_of_a_url() {
        assert_eq!(
            redact_password("postgres://ada:s3cr:et@db:5432/ledger?sslmode=disable"),
            "postgres://ada:***@db:5432/ledger?sslmode=disable"
        );
        assert_eq!(
            redact_password("postgresql://db/ledger?user=ada&password=hunter2"),
            "postgresql://db/ledger?user=ada&password=***"
        );
        assert_eq!(
            redact_password("postgres://evicortex@db.internal:5432/ledger"),
            "postgres://evicortex@db.internal:5432/ledger"
        );
    }

    #[test]
    fn hides_the_password_of_a_key_value_string() {
        assert_eq!(
            redact_password("host=db password=hunter2 dbname=ledger"),
            "host=db password=*** dbname=ledger"
        );
        assert_eq!(
            redact_password("host=db password = 'a \\' b' user=ada"),
            "host=db password = *** user=ada"
        );
        assert_eq!(redact_password("host=db mypassword=x"), "host=db mypassword=x");
    }
}
