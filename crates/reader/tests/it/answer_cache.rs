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
