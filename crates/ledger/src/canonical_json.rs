//! Canonical JSON: the one serialisation of a `meta` object that digests are computed over.

use serde_json::Value;

/// Serialises `value` canonically: object keys sorted by their UTF-8 bytes, no insignificant
/// whitespace, strings escaped as `serde_json` escapes them, numbers as `serde_json` prints them.
///
/// The order of keys in the input (which depends on whether some crate in the build enables
/// `serde_json/preserve_order`) never changes the output, so digests stay stable across builds.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value(item, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).expect("serialising a str cannot fail"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_keys_recursively_and_drops_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": [1, {"z": null, "a": 2.5}], "a": "x\n\u00e9" }"#)
                .unwrap();
        assert_eq!(canonical_json(&v), r#"{"a":"x\né","b":[1,{"a":2.5,"z":null}]}"#);
    }

    #[test]
    fn is_a_fixed_point_under_reparsing() {
        let v: Value =
            serde_json::from_str(r#"{"n": 1e2, "m": -0.0, "k": 18446744073709551615}"#).unwrap();
        let once = canonical_json(&v);
        let again = canonical_json(&serde_json::from_str(&once).unwrap());
        assert_eq!(once, again);
    }
}
