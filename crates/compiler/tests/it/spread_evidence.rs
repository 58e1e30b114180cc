use evicortex_compiler::{
    CompiledContext, ContextConfig, ExcerptConfig, FeedbackConfig, Layout, LinksConfig,
    NamesConfig, ReaderTokenizer, Retriever, TiktokenReader,
};
use evicortex_core::{Evidence, Role};

use crate::{
    fixture::{build, evidence},
    mechanisms::{chat, lists_of, run_with_context, with_context},
};

fn said(id: u64, session: &str, turn: u32, day: u32, speaker: &str, text: &str) -> Evidence {
    let time = format!("2024-05-{day:02}T10:{turn:02}:00Z");
    let mut e = evidence(id, "c", session, turn, Role::User, &time, text);
    e.turn.speaker = Some(speaker.to_owned());
    e
}

fn records(context: &CompiledContext) -> Vec<u64> {
    context.items.iter().map(|i| i.record.raw()).collect()
}

#[test]
fn feedback_turns_lead_to_turns_that_share_no_word_with_the_question() {
    let built = build("c", chat(), Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    let question = "What did Melanie pick at the market?";
    config.feedback = FeedbackConfig::Turns { docs: 1, terms: 3, rocchio: 0.5 };
    let context = run_with_context(&built, question, None, 500, &config);
    let feedback = context.feedback.as_ref().expect("recorded");
    assert_eq!(feedback.from.iter().map(|id| id.raw()).collect::<Vec<_>>(), [3]);
    assert!(feedback.terms.contains(&"rye".to_owned()), "{feedback:?}");
    assert!(feedback.dense, "an exact index gives its stored vectors");
    // Turn 4 says "rye bread": only the expanded question reaches it lexically.
    let lists = lists_of(&context, 4);
    assert!(lists.contains(&Retriever::LexicalFeedback), "{}", context.explain());
    assert!(!lists.contains(&Retriever::Lexical), "{}", context.explain());
    assert!(context.explain().contains("forms lexical_feedback"), "{}", context.explain());
    config.feedback = FeedbackConfig::Turns { docs: 0, terms: 3, rocchio: 0.0 };
    assert!(config.validate().unwrap_err().to_string().contains("feedback.docs"));
}

#[test]
fn a_rare_name_of_a_feedback_turn_links_the_turns_that_name_it() {
    let turns = vec![
        said(1, "s1", 0, 1, "Jon", "We flew out to see Lisbon in June."),
        said(2, "s1", 1, 1, "Gina", "Nice, how was the food?"),
        said(3, "s2", 0, 9, "Gina", "I still think about Lisbon and its trams."),
        said(4, "s2", 1, 9, "Jon", "The trams were the best part."),
        said(5, "s3", 0, 20, "Jon", "Work has been busy lately."),
    ];
    let built = build("c", turns, Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    config.links = LinksConfig::RareNames { from: 1, max_turns: 3, per_name: 2 };
    let context = run_with_context(&built, "Where did Jon fly?", None, 500, &config);
    let item = context.items.iter().find(|i| i.record.raw() == 3).expect("linked and packed");
    assert_eq!(item.linked_by.len(), 1, "{}", context.explain());
    assert_eq!((item.linked_by[0].name.as_str(), item.linked_by[0].from.raw()), ("Lisbon", 1));
    assert!(lists_of(&context, 3).contains(&Retriever::Linked));
    assert!(context.explain().contains("linked from #1 by Lisbon"), "{}", context.explain());
    let names = &context.feedback.as_ref().unwrap().names;
    assert_eq!(names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["Lisbon"]);
}

#[test]
fn named_searches_reach_deeper_into_the_named_speakers_turns_than_filtered_lists() {
    // Caroline's three turns match the question's words best; Melanie's comes fourth, below the
    // lists' three candidates.
    let turns = vec![
        said(1, "s1", 0, 1, "Caroline", "Melanie, bread bread bread"),
        said(2, "s1", 1, 1, "Caroline", "Melanie, bread and more bread"),
        said(3, "s1", 2, 1, "Caroline", "Melanie, bread again"),
        said(
            4,
            "s2",
            0,
            5,
            "Melanie",
            "I made a loaf of bread on Sunday with seeds, oats and honey.",
        ),
    ];
    let built = build("c", turns, Vec::new());
    let mut config = evicortex_compiler::CompileConfig::hybrid(
        3,
        evicortex_compiler::DenseConfig::On { top_n: 3 },
    );
    let question = "What bread did Melanie bake?";
    config.names = NamesConfig::SpeakerLists;
    let filtered = run_with_context(&built, question, None, 500, &config);
    config.names = NamesConfig::SpeakerSearch;
    let searched = run_with_context(&built, question, None, 500, &config);
    let named = |c: &CompiledContext| {
        lists_of(c, 4).iter().any(|l| matches!(l, Retriever::LexicalNamed | Retriever::DenseNamed))
    };
    assert!(named(&searched), "{}", searched.explain());
    assert!(records(&searched).contains(&4));
    assert_eq!(filtered.named_speakers, ["Melanie"]);
    assert!(!records(&filtered).contains(&4), "{}", filtered.explain());
}

#[test]
fn a_long_turn_is_packed_as_the_excerpt_that_holds_the_fact_cited_with_its_range() {
    let filler = "We talked about many unrelated things that afternoon. ".repeat(30);
    let long = format!("{filler}Your flight to Lisbon leaves at 9:40 from gate 12. {filler}");
    let mut turns = chat();
    turns.push(said(6, "s3", 0, 12, "Ada", &long));
    let built = build("c", turns, Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    // A third of 150 tokens: the turn of over 600 is cut to a run of at most 50.
    config.excerpts = ExcerptConfig::Matched { budget_share: 0.34 };
    let budget = 150;
    let context =
        run_with_context(&built, "When does my flight to Lisbon leave?", None, budget, &config);
    let item = context.items.iter().find(|i| i.record.raw() == 6).expect("the excerpt fits");
    let excerpt = item.excerpt.expect("cut");
    assert!(item.text.contains("flight to Lisbon leaves at 9:40"), "{}", item.text);
    let chars: String = long
        .chars()
        .skip(excerpt.start as usize)
        .take((excerpt.end - excerpt.start) as usize)
        .collect();
    assert_eq!(chars, item.text);
    let citation = format!("[#6 chars {}-{}]", excerpt.start, excerpt.end);
    assert!(context.text.contains(&citation), "{}", context.text);
    let line = context.text.lines().find(|l| l.starts_with("[#6 ")).unwrap();
    assert!(line.contains("] 10:00 user (Ada): \u{2026}"), "{line}");
    assert!(line.ends_with("\u{2026}"), "{line}");
    let reader = TiktokenReader::o200k_base();
    assert_eq!(reader.count(&context.text).unwrap(), context.tokens_used as usize);
    assert!(context.tokens_used <= budget);
    config.excerpts = ExcerptConfig::Off;
    let whole =
        run_with_context(&built, "When does my flight to Lisbon leave?", None, budget, &config);
    assert!(!records(&whole).contains(&6), "the whole turn does not fit: {}", whole.text);
}

#[test]
fn the_compact_layout_counts_exactly_and_says_less_per_line() {
    let built = build("c", chat(), Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    let question = "rye bread market starter";
    let chronological = run_with_context(&built, question, None, 500, &config);
    config.layout = Layout::Compact;
    let compact = run_with_context(&built, question, None, 500, &config);
    assert_eq!(records(&compact), records(&chronological));
    assert!(compact.text.contains("\nSession 2024-05-01 10:00:\n"), "{}", compact.text);
    assert!(compact.text.contains("] Melanie: I bought a sourdough starter."), "{}", compact.text);
    assert!(compact.text.contains("] 10:01 Caroline: "), "{}", compact.text);
    let reader = TiktokenReader::o200k_base();
    assert_eq!(reader.count(&compact.text).unwrap(), compact.tokens_used as usize);
    assert!(compact.tokens_used < chronological.tokens_used, "{}", compact.text);
}
