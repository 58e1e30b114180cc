use evicortex_eval::{datasets::longmemeval::LongMemEvalDataset, identify_file};

use crate::data_file;

#[test]
fn oracle_file_is_recognised_as_official_and_validates() {
    let path = data_file("longmemeval/longmemeval_oracle.json.gz");
    let ds = LongMemEvalDataset::read(&path, &|_| true).unwrap();
    assert!(ds.artifact.official);
    assert_eq!(ds.artifact.name, "longmemeval_oracle.json");
    assert_eq!(ds.stats.records, 500);
    assert_eq!(ds.stats.integer_answers, 32);
    assert_eq!(ds.stats.abstention, 30);
    assert_eq!(ds.stats.repeated_sessions, 0);
}

#[test]
fn locomo_dev_file_is_known_but_not_official() {
    let id = identify_file(&data_file("locomo/locomo10.dev.json")).unwrap();
    assert!(!id.official);
    assert_eq!(id.name, "locomo10.dev.json");
}

#[test]
fn locomo_dev_reads_with_malformed_evidence_counted() {
    let ds = evicortex_eval::datasets::locomo::LocomoDataset::read(&data_file(
        "locomo/locomo10.dev.json",
    ))
    .unwrap();
    let s = &ds.stats;
    assert_eq!((s.conversations, s.sessions, s.turns, s.questions), (2, 38, 788, 304));
    assert_eq!(s.evidence_split, 1, "{s:?}");
    assert_eq!(s.questions_by_category["adversarial"], 71);
}
