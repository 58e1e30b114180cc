//! `sslmode`, `sslrootcert` and `pool_max`, taken out of a connection string before the client
//! parses it.
//!
//! The client's parser knows `sslmode` only as `disable`, `prefer` or `require` (none of which
//! verifies anything) and refuses `sslrootcert`; this crate decides both itself (`tls.rs`), so
//! they are removed from the string and the rest goes to the client unchanged. `pool_max` is
//! this crate's own: the most connections a handle opens (`client_pool.rs`).

/// The TLS parameters found in a connection string, and the string without them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsParams {
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
    pub pool_max: Option<String>,
    pub rest: String,
}

/// Why the parameters could not be taken out.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParamError {
    pub parameter: &'static str,
    pub reason: String,
}

const TAKEN: [&str; 3] = ["sslmode", "sslrootcert", "pool_max"];

/// Splits `url` (a `postgres://` / `postgresql://` URL or a key-value string) into its TLS
/// parameters and the rest. A parameter given twice is refused: which one wins would be a guess.
pub(crate) fn take_tls_params(url: &str) -> Result<TlsParams, ParamError> {
    take(url, &TAKEN)
}

/// `url` without its `pool_max` parameter: how many connections a handle opens does not change
/// which database the string names. A string whose `pool_max` cannot be taken out (given
/// twice) is returned as it is; connecting refuses it.
pub(crate) fn without_pool_max(url: &str) -> String {
    take(url, &["pool_max"]).map_or_else(|_| url.to_owned(), |p| p.rest)
}

/// Takes the parameters named in `taken` (a subset of [`TAKEN`]) out of `url`.
fn take(url: &str, taken: &[&'static str]) -> Result<TlsParams, ParamError> {
    let trimmed = url.trim();
    let is_uri = ["postgres://", "postgresql://"].iter().any(|s| trimmed.starts_with(s));
    if is_uri { take_from_uri(trimmed, taken) } else { take_from_key_value(url, taken) }
}

fn take_from_uri(url: &str, taken: &[&'static str]) -> Result<TlsParams, ParamError> {
    // A password may hold a '?' only percent-encoded, but an '@' before the host is the
    // separator: the query starts at the first '?' after it.
    let authority_start = url.rfind('@').map_or(0, |at| at + 1);
    let Some(q) = url[authority_start..].find('?').map(|i| authority_start + i) else {
        return Ok(TlsParams { rest: url.to_owned(), ..TlsParams::default() });
    };
    let mut params = TlsParams::default();
    let mut kept = Vec::new();
    for pair in url[q + 1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match taken.iter().find(|t| **t == key) {
            Some(&parameter) => {
                set_once(&mut params, parameter, percent_decode(parameter, value)?)?
            }
            None => kept.push(pair),
        }
    }
    params.rest = if kept.is_empty() {
        url[..q].to_owned()
    } else {
        format!("{}?{}", &url[..q], kept.join("&"))
    };
    Ok(params)
}

fn take_from_key_value(conn: &str, taken: &[&'static str]) -> Result<TlsParams, ParamError> {
    let mut params = TlsParams::default();
    let mut rest = String::with_capacity(conn.len());
    let mut copied_to = 0;
    for pair in key_value_pairs(conn) {
        if let Some(&parameter) = taken.iter().find(|t| **t == pair.key) {
            set_once(&mut params, parameter, pair.value)?;
            rest.push_str(&conn[copied_to..pair.start]);
            copied_to = pair.end;
        }
    }
    rest.push_str(&conn[copied_to..]);
    params.rest = rest;
    Ok(params)
}

fn set_once(
    params: &mut TlsParams,
    parameter: &'static str,
    value: String,
) -> Result<(), ParamError> {
    let slot = match parameter {
        "sslmode" => &mut params.sslmode,
        "sslrootcert" => &mut params.sslrootcert,
        _ => &mut params.pool_max,
    };
    if slot.is_some() {
        return Err(ParamError { parameter, reason: "is given more than once".to_owned() });
    }
    *slot = Some(value);
    Ok(())
}

fn percent_decode(parameter: &'static str, value: &str) -> Result<String, ParamError> {
    let bad = |reason: &str| ParamError { parameter, reason: reason.to_owned() };
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).ok_or_else(|| bad("has a malformed %-escape"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad("has a malformed %-escape"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad("is not UTF-8 once %-decoded"))
}

/// One `key = value` of a key-value string, with the byte range it covers.
struct Pair {
    key: String,
    value: String,
    start: usize,
    end: usize,
}

/// The pairs of a key-value string, as libpq reads them: `key = value`, the value single-quoted
/// (with `\'` and `\\`) or running to the next space (with backslash escapes). Malformed text
/// is left to the client's parser, which reports it.
fn key_value_pairs(conn: &str) -> Vec<Pair> {
    let chars: Vec<(usize, char)> = conn.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let offset = |i: usize| chars.get(i).map_or(conn.len(), |&(o, _)| o);
    let mut pairs = Vec::new();
    let mut i = 0;
    loop {
        while at(i).is_some_and(char::is_whitespace) {
            i += 1;
        }
        if at(i).is_none() {
            return pairs;
        }
        let start = i;
        while at(i).is_some_and(|c| c != '=' && !c.is_whitespace()) {
            i += 1;
        }
        let key = conn[offset(start)..offset(i)].to_owned();
        while at(i).is_some_and(char::is_whitespace) {
            i += 1;
        }
        if at(i) != Some('=') {
            return pairs;
        }
        i += 1;
        while at(i).is_some_and(char::is_whitespace) {
            i += 1;
        }
        let mut value = String::new();
        if at(i) == Some('\'') {
            i += 1;
            loop {
                match at(i) {
                    None => return pairs,
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some('\\') if at(i + 1).is_some() => {
                        value.push(at(i + 1).unwrap_or_default());
                        i += 2;
                    }
                    Some(c) => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while let Some(c) = at(i).filter(|c| !c.is_whitespace()) {
                if c == '\\' && at(i + 1).is_some() {
                    value.push(at(i + 1).unwrap_or_default());
                    i += 2;
                } else {
                    value.push(c);
                    i += 1;
                }
            }
        }
        pairs.push(Pair { key, value, start: offset(start), end: offset(i) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(url: &str) -> TlsParams {
        take_tls_params(url).unwrap()
    }

    #[test]
    fn takes_the_parameters_out_of_a_url() {
        let p = taken(
            "postgres://ada:pw@db.example:5432/ledger?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca%20file.pem",
        );
        assert_eq!(p.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(p.sslrootcert.as_deref(), Some("/etc/ca file.pem"));
        assert_eq!(p.rest, "postgres://ada:pw@db.example:5432/ledger?application_name=x");

        let p = taken("postgresql://db/ledger?sslmode=disable");
        assert_eq!(
            (p.sslmode.as_deref(), p.rest.as_str()),
            (Some("disable"), "postgresql://db/ledger")
        );

        let p = taken("postgres://a:p%3Fq@db/ledger");
        assert_eq!(
            (p.sslmode, p.sslrootcert, p.rest.as_str()),
            (None, None, "postgres://a:p%3Fq@db/ledger")
        );
    }

    #[test]
    fn takes_the_parameters_out_of_a_key_value_string() {
        let p = taken(
            "host=db sslmode = verify-ca dbname=ledger sslrootcert='/etc/my ca\\'s.pem' user=ada",
        );
        assert_eq!(p.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(p.sslrootcert.as_deref(), Some("/etc/my ca's.pem"));
        assert_eq!(p.rest, "host=db  dbname=ledger  user=ada");
    }

    #[test]
    fn without_pool_max_keeps_everything_else() {
        assert_eq!(
            without_pool_max("postgres://u:***@db/x?pool_max=3&sslmode=disable"),
            "postgres://u:***@db/x?sslmode=disable"
        );
        assert_eq!(without_pool_max("postgres://db/x?pool_max=3"), "postgres://db/x");
        assert_eq!(without_pool_max("postgres://db/x?a=1"), "postgres://db/x?a=1");
        assert_eq!(without_pool_max("host=db pool_max=2 dbname=x"), "host=db  dbname=x");
    }

    #[test]
    fn takes_pool_max_out_of_both_forms() {
        let p = taken("postgres://db/ledger?pool_max=3&application_name=x");
        assert_eq!(p.pool_max.as_deref(), Some("3"));
        assert_eq!(p.rest, "postgres://db/ledger?application_name=x");
        let p = taken("host=db pool_max=12 dbname=ledger");
        assert_eq!(p.pool_max.as_deref(), Some("12"));
        assert_eq!(p.rest, "host=db  dbname=ledger");
    }

    #[test]
    fn refuses_a_parameter_given_twice_or_malformed() {
        let twice =
            take_tls_params("postgres://db/x?sslmode=disable&sslmode=verify-full").unwrap_err();
        assert_eq!(twice.parameter, "sslmode");
        let twice = take_tls_params("host=db sslrootcert=a sslrootcert=b").unwrap_err();
        assert_eq!(twice.parameter, "sslrootcert");
        let bad = take_tls_params("postgres://db/x?sslrootcert=%zz").unwrap_err();
        assert_eq!(bad.parameter, "sslrootcert");
    }
}
