use std::collections::BTreeSet;

use evicortex_eval::answer_score::{
    LocomoCategory, locomo_answer_score, locomo_normalize_answer, porter_stem,
};

const PORTER_GOLDEN: &str = include_str!("../data/porter_nltk_golden.tsv");
const DEV_STEMS: &str = include_str!("../data/locomo_dev_stems.txt");
const DEV_F1: &str = include_str!("../data/locomo_dev_f1.txt");

#[test]
fn porter_stems_match_nltk_on_every_rule() {
    let mut checked = 0;
    for line in PORTER_GOLDEN.lines() {
        let (word, stem) = line.split_once('\t').expect("word<TAB>stem");
        assert_eq!(porter_stem(word), stem, "stem of {word:?}");
        checked += 1;
    }
    assert!(checked > 150, "{checked}");
}

struct DevQuestion {
    category: u32,
    question: String,
    answer: String,
}

fn locomo_dev_questions() -> Vec<DevQuestion> {
    let path = crate::data_file("locomo/locomo10.dev.json");
    let json: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = Vec::new();
    for conversation in json.as_array().unwrap() {
        for qa in conversation["qa"].as_array().unwrap() {
            let category = qa["category"].as_u64().unwrap() as u32;
            let answer = if category == 5 { &qa["adversarial_answer"] } else { &qa["answer"] };
            out.push(DevQuestion {
                category,
                question: qa["question"].as_str().unwrap().to_owned(),
                answer: text(answer),
            });
        }
    }
    out
}

fn predictions(q: &DevQuestion) -> Vec<String> {
    if q.category == 5 {
        return vec!["Not mentioned in the conversation.".to_owned(), q.answer.clone()];
    }
    let words: Vec<&str> = q.answer.split_whitespace().collect();
    vec![
        q.answer.clone(),
        format!("It was {} I think", q.answer.to_uppercase()),
        words[..(words.len() / 2).max(1)].join(" "),
        q.question.clone(),
    ]
}

#[test]
fn porter_stems_match_nltk_on_the_locomo_dev_vocabulary() {
    let questions = locomo_dev_questions();
    let mut words = BTreeSet::new();
    for q in &questions {
        for text in [&q.answer, &q.question] {
            words.extend(locomo_normalize_answer(text).split(' ').map(str::to_owned));
        }
    }
    words.remove("");
    let golden: Vec<&str> = DEV_STEMS.lines().collect();
    assert_eq!(words.len(), golden.len(), "distinct tokens");
    let wrong: Vec<String> = words
        .iter()
        .zip(&golden)
        .filter(|(word, stem)| porter_stem(word) != **stem)
        .map(|(word, stem)| format!("{word}: {} != {stem}", porter_stem(word)))
        .collect();
    assert!(wrong.is_empty(), "{} of {} stems differ: {wrong:?}", wrong.len(), words.len());
}

#[test]
fn locomo_scores_match_the_released_scorer_on_dev() {
    let golden: Vec<f64> = DEV_F1.lines().map(|l| l.parse().unwrap()).collect();
    let mut scores = Vec::new();
    for q in locomo_dev_questions() {
        let category = LocomoCategory::from_number(q.category).unwrap();
        for prediction in predictions(&q) {
            scores.push((locomo_answer_score(category, &prediction, &q.answer), prediction));
        }
    }
    assert_eq!(scores.len(), golden.len(), "scored predictions");
    let wrong: Vec<String> = scores
        .iter()
        .zip(&golden)
        .filter(|((ours, _), theirs)| (ours - **theirs).abs() > 1e-12)
        .map(|((ours, prediction), theirs)| format!("{prediction:?}: {ours} != {theirs}"))
        .collect();
    assert!(wrong.is_empty(), "{} of {} scores differ: {wrong:?}", wrong.len(), golden.len());
    let positive = golden.iter().filter(|s| **s > 0.0).count();
    assert!(positive > golden.len() / 3, "the goldens exercise non-zero scores: {positive}");
}
