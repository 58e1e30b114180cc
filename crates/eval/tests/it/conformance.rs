use evicortex_eval::{
    controls::{bm25_official::rank_bm25_official, bm25_okapi::Bm25OkapiParams},
    datasets::longmemeval::LongMemEvalDataset,
    protocol::{EvidenceKeys, Exclusion},
    scoring::{MeanScores, score_ranking},
};

use crate::data_file;

/// bm25-official with no budget on the 499-record S file: the numbers of the released
/// evaluation (computed with rank_bm25 and eval_utils.py), within 0.005.
#[test]
fn bm25_official_reproduces_the_released_numbers_on_s_499() {
    let path = data_file("longmemeval/longmemeval_s_cleaned.499of500.json.gz");
    let ds = LongMemEvalDataset::read(&path, &|_| true).unwrap();
    assert!(!ds.artifact.official, "the 499-record file must never be labelled official");
    assert_eq!(ds.artifact.name, "longmemeval_s_cleaned.499of500.json");
    assert_eq!(ds.stats.records, 499);
    assert_eq!(ds.stats.questions_with_repeated_sessions, 13);
    let mut mean = MeanScores::default();
    let (mut abstention, mut no_user_evidence) = (0, 0);
    for q in &ds.questions {
        let keys = EvidenceKeys::of(q);
        match keys.exclusion {
            Some(Exclusion::Abstention) => abstention += 1,
            Some(Exclusion::NoUserEvidence) => no_user_evidence += 1,
            None => mean.add(&score_ranking(
                &keys,
                &rank_bm25_official(q, Bm25OkapiParams::RELEASED),
                &[5, 10],
            )),
        }
    }
    assert_eq!(mean.count(), 418, "abstention {abstention}, no user evidence {no_user_evidence}");
    let m = mean.mean();
    let expected = [
        ("session", "recall_all@5", 0.7416),
        ("session", "recall_all@10", 0.8230),
        ("session", "ndcg_any@5", 0.7710),
        ("session", "ndcg_any@10", 0.7934),
        ("turn", "recall_all@5", 0.4880),
        ("turn", "recall_all@10", 0.5909),
    ];
    let mut report = String::new();
    let mut ok = true;
    for (level, metric, want) in expected {
        let got = if level == "session" { m.session[metric] } else { m.turn[metric] };
        report.push_str(&format!("{level} {metric}: {got:.4} (released {want:.4})\n"));
        ok &= (got - want).abs() <= 0.005;
    }
    eprintln!("{report}");
    assert!(ok, "bm25-official differs from the released numbers:\n{report}");
}
