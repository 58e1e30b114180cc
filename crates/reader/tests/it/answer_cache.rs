use evicortex_reader::{
    AnswerCache, AnswerKey, AnswerRequest, CacheOutcome, DecodingSettings, build_answer_prompt,
};

use crate::test_reader;

#[test]
fn a_second_read_of_the_same_prompt_is_a_hit_with_the_same_answer() {
    let reader = test_reader();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("answers.sqlite");
    let context = "Evidence from memory, oldest first. Cite as [#record].\n\nSession s1 \
                   (2024-05-02):\n[#12] 10:00 user: I moved to Lisbon in May.\n";
    let prompt = build_answer_prompt(&AnswerRequest {
        question: "Where did I move?",
        context,
        question_date: None,
    });
    let decoding = DecodingSettings::greedy(6);
    let (first, outcome) =
        AnswerCache::open(&path).unwrap().answer(reader, &prompt, &decoding).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    assert!(first.prompt_tokens > 50 && first.generated_tokens <= 6, "{first:?}");

    let reopened = AnswerCache::open(&path).unwrap();
    let (again, outcome) = reopened.answer(reader, &prompt, &decoding).unwrap();
    assert_eq!(outcome, CacheOutcome::Hit);
    assert_eq!(again, first);

    // Other decoding settings are another key.
    let other = DecodingSettings::greedy(5);
    assert!(reopened.get(&AnswerKey::new(reader, &prompt, &other)).unwrap().is_none());
}

#[test]
fn exported_answers_seed_another_cache_and_a_bad_line_stores_nothing() {
    let reader = test_reader();
    let tmp = tempfile::tempdir().unwrap();
    let prompt = build_answer_prompt(&AnswerRequest {
        question: "What is my dog called?",
        context: "Evidence from memory, oldest first. Cite as [#record].\n\nSession s1 \
                  (2024-05-02):\n[#3] 10:00 user: My dog is called Biscuit.\n",
        question_date: None,
    });
    let decoding = DecodingSettings::greedy(4);
    let first_cache = AnswerCache::open(&tmp.path().join("first.sqlite")).unwrap();
    let (first, _) = first_cache.answer(reader, &prompt, &decoding).unwrap();
    let exported = tmp.path().join("answers.jsonl");
    assert_eq!(first_cache.export_jsonl(&exported).unwrap(), 1);

    let second = AnswerCache::open(&tmp.path().join("second.sqlite")).unwrap();
    assert_eq!(second.import_jsonl(&exported).unwrap(), 1);
    let (again, outcome) = second.answer(reader, &prompt, &decoding).unwrap();
    assert_eq!(outcome, CacheOutcome::Hit);
    assert_eq!(again, first);

    let third = AnswerCache::open(&tmp.path().join("third.sqlite")).unwrap();
    let good = fs_err::read_to_string(&exported).unwrap();
    let broken = tmp.path().join("broken.jsonl");
    fs_err::write(&broken, format!("{good}{{\"reader\": 1}}\n")).unwrap();
    let err = third.import_jsonl(&broken).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(third.get(&AnswerKey::new(reader, &prompt, &decoding)).unwrap().is_none());
}
