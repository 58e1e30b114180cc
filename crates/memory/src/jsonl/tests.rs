//! The JSONL reader's errors and limits, line by line.

use super::*;

#[track_caller]
fn check_err(line: &str, expect: &str) {
    let err = parse_jsonl("in.jsonl", line.as_bytes(), &IngestOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), expect);
}

const OK: &str = r#"{"namespace":"a","session":"s","turn":1,"role":"user","text":"hi","time":"2024-01-01T00:00:00Z"}"#;

#[test]
fn parses_a_full_line_and_skips_blank_lines() {
    let input = format!(
        "\n{OK}\n  \n{}\n",
        r#"{"namespace":"a","session":"s","turn":2,"role":"assistant","speaker":"Bot","text":" x\t","time":"2024-01-01T00:00:00.25+05:30","meta":{"k":[1]}}"#
    );
    let turns = parse_jsonl("f", input.as_bytes(), &IngestOptions::default()).unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].text, " x\t");
    assert_eq!(turns[1].speaker.as_deref(), Some("Bot"));
    assert_eq!(turns[1].time.offset_seconds(), 19800);
    assert_eq!(turns[1].meta["k"], serde_json::json!([1]));
}

#[test]
fn names_file_line_and_field() {
    check_err("{", "in.jsonl:1: malformed JSON: EOF while parsing an object at line 1 column 1");
    check_err(
        "[1]",
        "in.jsonl:1: malformed JSON: invalid type: sequence, expected a JSON object (one turn per line) at line 1 column 0",
    );
    check_err(
        &OK.replace(r#""role":"user""#, r#""role":"narrator""#),
        "in.jsonl:1: field `role`: unknown role \"narrator\", expected one of user, assistant, system, tool",
    );
    check_err(
        &OK.replace(r#""turn":1"#, r#""turn":"1""#),
        "in.jsonl:1: field `turn`: must be an integer, found a string",
    );
    check_err(
        &OK.replace(r#""turn":1"#, r#""turn":-1"#),
        "in.jsonl:1: field `turn`: must be an integer from 0 to 4294967295, found -1",
    );
    check_err(&OK.replace(r#","text":"hi""#, ""), "in.jsonl:1: field `text`: is missing");
    check_err(
        &OK.replace("2024-01-01T00:00:00Z", "2024-01-01T00:00:00"),
        "in.jsonl:1: field `time`: \"2024-01-01T00:00:00\" is not an RFC 3339 time with an explicit offset (e.g. 2024-05-02T10:00:00+01:00): premature end of input",
    );
    check_err(
        &OK.replace(r#""text""#, r#""txet""#),
        "in.jsonl:1: field `txet`: unknown field (expected namespace, session, turn, role, speaker, text, time, meta)",
    );
    check_err(
        &OK.replace(r#""turn":1"#, r#""turn":1,"turn":2"#),
        "in.jsonl:1: malformed JSON: duplicate field `turn` at line 1 column 48",
    );
}

/// Found by fuzzing (fuzz/regressions/jsonl): a key that is the empty string was refused as
/// "field ``", naming nothing.
#[test]
fn an_unknown_field_with_an_empty_name_is_named_as_such() {
    let input = format!("{OK}\n\n{}\n", OK.replacen('{', r#"{"":"x","#, 1));
    let err = parse_jsonl("in.jsonl", input.as_bytes(), &IngestOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "in.jsonl:3: field `\"\"`: unknown field with an empty name (expected namespace, \
         session, turn, role, speaker, text, time, meta)"
    );
}

/// Found by fuzzing (fuzz/regressions/jsonl): a key holding a control character was named
/// with the raw character; it is named as written in JSON.
#[test]
fn an_unknown_field_with_a_control_character_is_named_in_its_json_form() {
    let input = OK.replacen('{', r#"{"ro\fle":"x","#, 1);
    let err = parse_jsonl("in.jsonl", input.as_bytes(), &IngestOptions::default()).unwrap_err();
    assert!(err.to_string().starts_with(r#"in.jsonl:1: field `"ro\fle"`: unknown field"#), "{err}");
}

#[test]
fn reports_the_line_of_invalid_utf8() {
    let mut input = format!("{OK}\n").into_bytes();
    input.extend_from_slice(b"{\"text\":\"\xff\"}\n");
    let err = parse_jsonl("f", &input, &IngestOptions::default()).unwrap_err();
    assert_eq!(err, IngestError::InvalidUtf8 { file: "f".into(), line: 2, byte: 9 });
}

#[test]
fn refuses_text_over_the_limit_without_truncating() {
    let options = IngestOptions { max_text_bytes: 1, ..IngestOptions::default() };
    let err = parse_jsonl("f", OK.as_bytes(), &options).unwrap_err();
    assert!(matches!(err, IngestError::InvalidField { ref field, .. } if field == "text"), "{err}");
}

#[test]
fn default_namespace_fills_in_and_conflicts_are_refused() {
    let no_ns = OK.replace(r#""namespace":"a","#, "");
    check_err(
        &no_ns,
        "in.jsonl:1: field `namespace`: is missing (give it per line or with --namespace)",
    );
    let options = IngestOptions {
        default_namespace: Some(Namespace::new("b").unwrap()),
        ..IngestOptions::default()
    };
    assert_eq!(parse_jsonl("f", no_ns.as_bytes(), &options).unwrap()[0].namespace.as_str(), "b");
    let err = parse_jsonl("f", OK.as_bytes(), &options).unwrap_err();
    assert!(
        err.to_string().contains("field `namespace`: is \"a\" but the namespace option says \"b\""),
        "{err}"
    );
}

/// B4: accepted input is never silently changed. Each of these was stored altered.
#[test]
fn input_that_would_be_stored_changed_is_refused() {
    check_err(
        &OK.replace(r#""time""#, r#""meta":{"n":123456789012345678901234567890},"time""#),
        "in.jsonl:1: field `meta.n`: 1.2345678901234568e+29 is outside the 64-bit integer \
         range, where JSON numbers lose precision when parsed; give it as a string",
    );
    check_err(
        &OK.replace(r#""time""#, r#""meta":{"a":[{"b":-9223372036854775809}]},"time""#),
        "in.jsonl:1: field `meta.a[0].b`: -9.223372036854776e+18 is outside the 64-bit \
         integer range, where JSON numbers lose precision when parsed; give it as a string",
    );
    check_err(
        &OK.replace(r#""time""#, r#""meta":{"a":1,"a":2},"time""#),
        "in.jsonl:1: malformed JSON: duplicate field `a` at line 1 column 86",
    );
    check_err(
        &OK.replace(r#""time""#, r#""meta":{"x":{"a":1,"a":1}},"time""#),
        "in.jsonl:1: malformed JSON: duplicate field `a` at line 1 column 91",
    );
    check_err(
        &OK.replace("2024-01-01T00:00:00Z", "2016-12-31T23:59:60Z"),
        "in.jsonl:1: field `time`: \"2016-12-31T23:59:60Z\" is a leap second (:60), which \
         the ledger cannot store: it would become the next second",
    );
    check_err(
        &OK.replace("2024-01-01T00:00:00Z", "2024-01-01T00:00:00-00:00"),
        "in.jsonl:1: field `time`: \"2024-01-01T00:00:00-00:00\" has the offset -00:00 \
         (RFC 3339: local offset unknown), which would be stored as Z; give the real \
         offset, or Z if UTC is meant",
    );
}

/// The same refusals reach the HTTP and MCP servers, which pass parsed objects.
#[test]
fn parsed_objects_get_the_same_refusals() {
    let base: Map<String, Value> = serde_json::from_str(OK).unwrap();
    let with = |key: &str, value: Value| {
        let mut o = base.clone();
        o.insert(key.to_owned(), value);
        turn_from_json(&o, &IngestOptions::default()).unwrap_err().field
    };
    let big: Value = serde_json::from_str(r#"{"n":[1e30]}"#).unwrap();
    assert_eq!(with("meta", big), "meta.n[0]");
    assert_eq!(with("time", "2016-12-31T23:59:60+01:00".into()), "time");
    assert_eq!(with("time", "2024-01-01T00:00:00-00:00".into()), "time");
    // The 64-bit extremes are exact; a huge float is refused with them in the same list.
    let mixed: Value =
        serde_json::from_str(r#"{"n":[18446744073709551615,-9223372036854775808,1.5e300]}"#)
            .unwrap();
    assert_eq!(with("meta", mixed), "meta.n[2]");
    let exact: Value =
        serde_json::from_str(r#"{"n":[18446744073709551615,-9223372036854775808,0.1]}"#).unwrap();
    let mut o = base.clone();
    o.insert("meta".to_owned(), exact.clone());
    assert_eq!(Value::Object(turn_from_json(&o, &IngestOptions::default()).unwrap().meta), exact);
}

#[test]
fn turn_objects_over_http_refuse_duplicate_keys_at_any_depth() {
    #[derive(Debug, serde::Deserialize)]
    struct Body {
        #[serde(deserialize_with = "deserialize_turn_objects")]
        #[allow(dead_code, reason = "only parsed")]
        turns: Vec<Map<String, Value>>,
    }
    let ok = format!(r#"{{"turns":[{OK}]}}"#);
    serde_json::from_str::<Body>(&ok).unwrap();
    let dup = ok.replace(r#""time""#, r#""meta":{"k":{"z":1,"z":2}},"time""#);
    let err = serde_json::from_str::<Body>(&dup).unwrap_err();
    assert!(err.to_string().starts_with("duplicate field `z`"), "{err}");
}

#[test]
fn refuses_sub_microsecond_times() {
    check_err(
        &OK.replace("00:00:00Z", "00:00:00.0000001Z"),
        "in.jsonl:1: field `time`: has sub-microsecond precision; the ledger stores microseconds",
    );
}
