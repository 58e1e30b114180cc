use serde_json::json;

use super::*;

/// A small synthetic record (not LongMemEval data): one answer session and one filler session.
fn synthetic_record() -> Value {
    json!({
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What degree did I graduate with?",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer": "Business Administration",
        "answer_session_ids": ["answer_a1"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/30 (Tue) 23:50"],
        "haystack_session_ids": ["filler_1", "answer_a1"],
        "haystack_sessions": [
            [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
            [
                {"role": "user", "content": "I graduated in Business Administration", "has_answer": true},
                {"role": "assistant", "content": "congratulations", "has_answer": false}
            ]
        ]
    })
}

fn read_records(records: Vec<Value>) -> Result<LongMemEvalDataset, DatasetError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synthetic_longmemeval.json");
    fs_err::write(&path, serde_json::to_vec(&Value::Array(records)).unwrap()).unwrap();
    LongMemEvalDataset::read(&path, &|_| true)
}

#[track_caller]
fn check_refused(edit: impl FnOnce(&mut Value), expect_field: &str, expect_reason: &str) {
    let mut record = synthetic_record();
    edit(&mut record);
    match read_records(vec![record]) {
        Err(DatasetError::InvalidRecord { record, field, reason, .. }) => {
            assert_eq!(field, expect_field, "reason was {reason}");
            assert!(reason.contains(expect_reason), "reason {reason:?} lacks {expect_reason:?}");
            assert!(record == "q1" || record.starts_with('#'));
        }
        other => panic!("expected an invalid record, got {other:?}"),
    }
}

#[test]
fn reads_a_valid_record_and_counts_the_as_of_effect() {
    let ds = read_records(vec![synthetic_record()]).unwrap();
    assert_eq!(ds.questions.len(), 1);
    let q = &ds.questions[0];
    assert_eq!(q.id(), "q1");
    assert!(!q.abstention);
    assert_eq!(q.answer, Answer::Text("Business Administration".into()));
    assert_eq!(q.as_of().to_string(), "2023-05-30 23:59:59");
    assert_eq!(ds.stats.sessions_after_question_time_same_day, 1);
    assert_eq!(ds.stats.sessions_after_as_of, 0);
    assert!(!ds.artifact.official);
    assert_eq!(ds.artifact.name, "unofficial");
}

#[test]
fn integer_answers_are_accepted_and_fractions_refused() {
    let mut r = synthetic_record();
    r["answer"] = json!(3);
    let ds = read_records(vec![r]).unwrap();
    assert_eq!(ds.questions[0].answer, Answer::Integer(3));
    assert_eq!(ds.stats.integer_answers, 1);
    check_refused(|r| r["answer"] = json!(2.5), "answer", "not an integer");
    check_refused(|r| r["answer"] = json!(null), "answer", "string or an integer");
}

#[test]
fn timestamps_are_strict_and_weekday_is_checked() {
    check_refused(|r| r["question_date"] = json!("2023/05/30 (Wed) 23:40"), "question_date", "");
    check_refused(
        |r| r["question_date"] = json!("2023-05-30 23:40"),
        "question_date",
        "does not match",
    );
    check_refused(
        |r| r["haystack_dates"][1] = json!("2023/05/30 (Tue) 7:50"),
        "haystack_dates[1]",
        "",
    );
}

#[test]
fn haystack_lists_must_have_equal_length() {
    check_refused(
        |r| r["haystack_dates"].as_array_mut().unwrap().pop().map(drop).unwrap_or(()),
        "haystack_sessions",
        "differ in length",
    );
}

#[test]
fn answer_sessions_must_be_in_the_haystack() {
    check_refused(
        |r| r["answer_session_ids"] = json!(["answer_a1", "answer_zz"]),
        "answer_session_ids[1]",
        "not in haystack_session_ids",
    );
    check_refused(
        |r| r["answer_session_ids"] = json!([]),
        "haystack_session_ids[1]",
        "not in answer_session_ids",
    );
}

#[test]
fn has_answer_only_in_answer_sessions_and_on_every_turn_there() {
    check_refused(
        |r| r["haystack_sessions"][0][0]["has_answer"] = json!(false),
        "haystack_sessions[0][0].has_answer",
        "non-answer session",
    );
    check_refused(
        |r| {
            r["haystack_sessions"][1][1].as_object_mut().unwrap().remove("has_answer");
        },
        "haystack_sessions[1][1].has_answer",
        "missing",
    );
}

#[test]
fn fields_are_named_with_the_question() {
    check_refused(
        |r| {
            r.as_object_mut().unwrap().remove("question");
        },
        "question",
        "missing",
    );
    check_refused(|r| r["extra"] = json!(1), "extra", "not a LongMemEval field");
    check_refused(|r| r["question_type"] = json!("trivia"), "question_type", "unknown type");
    check_refused(
        |r| r["haystack_sessions"][0][1]["role"] = json!("system"),
        "haystack_sessions[0][1].role",
        "",
    );
    check_refused(|r| r["question_id"] = json!("q/1"), "question_id", "namespace");
}

#[test]
fn repeated_filler_sessions_are_kept_numbered_and_counted() {
    let mut r = synthetic_record();
    r["haystack_session_ids"] = json!(["filler_1", "answer_a1", "filler_1"]);
    r["haystack_dates"].as_array_mut().unwrap().push(json!("2023/05/21 (Sun) 10:00"));
    let filler = r["haystack_sessions"][0].clone();
    r["haystack_sessions"].as_array_mut().unwrap().push(filler);
    let ds = read_records(vec![r.clone()]).unwrap();
    let s = &ds.questions[0].sessions;
    assert_eq!((s[2].occurrence, s[2].unique_id()), (2, "filler_1#2".to_owned()));
    assert_eq!((ds.stats.questions_with_repeated_sessions, ds.stats.repeated_sessions), (1, 1));
    r["haystack_sessions"][2][0]["content"] = json!("different");
    let err = read_records(vec![r]).unwrap_err();
    assert!(err.to_string().contains("repeats with different content"), "{err}");
}

#[test]
fn duplicate_question_ids_are_refused() {
    let err = read_records(vec![synthetic_record(), synthetic_record()]).unwrap_err();
    assert!(err.to_string().contains("repeats the id of record 0"), "{err}");
}

#[test]
fn abstention_is_the_abs_suffix() {
    let mut r = synthetic_record();
    r["question_id"] = json!("q1_abs");
    let ds = read_records(vec![r]).unwrap();
    assert!(ds.questions[0].abstention);
    assert_eq!(ds.stats.abstention, 1);
}

#[test]
fn malformed_json_is_a_json_error_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    fs_err::write(&path, b"[{\"question_id\": ").unwrap();
    let err = LongMemEvalDataset::read(&path, &|_| true).unwrap_err();
    assert!(matches!(err, DatasetError::Json { .. }), "{err}");
}

/// Found by the `longmemeval` fuzz target: a session id the ledger refuses (here over its length
/// limit) was accepted by the adapter and only failed at ingest.
#[test]
fn a_session_id_the_ledger_refuses_is_refused_naming_it() {
    let long = format!("filler_{}", "v".repeat(300));
    check_refused(
        |r| {
            r["haystack_session_ids"][0] = json!(long);
        },
        "haystack_session_ids[0]",
        "long",
    );
}
