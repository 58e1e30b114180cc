//! The default's mechanisms, each seen in the compiled context: context lists (and their as-of
//! rule), named-speaker lists, the time-window list and the long-turn rule; and the session
//! list and the session spread, which the default leaves off.

use evicortex_compiler::{
    CompileConfig, CompileInputs, CompiledContext, ContextConfig, ContextInputs, ContextVectors,
    DenseConfig, DenseInput, LongTurns, NamesConfig, Retriever, SessionConfig, SessionSpread,
    SpreadQuestions, TiktokenReader, TimeConfig, WindowIndex, compile,
};
use evicortex_core::{Evidence, Role, TurnId};
use evicortex_lexical::Bm25Params;

use crate::fixture::{Built, bag_of_words, build, evidence, query};

/// A baking chat between Melanie and Caroline over two sessions (every turn of namespace `c`).
pub(crate) fn chat() -> Vec<Evidence> {
    let said = |id, session, turn, time, speaker: &str, text| {
        let mut e = evidence(id, "c", session, turn, Role::User, time, text);
        e.turn.speaker = Some(speaker.to_owned());
        e
    };
    vec![
        said(1, "s1", 0, "2024-05-01T10:00:00Z", "Melanie", "I bought a sourdough starter."),
        said(2, "s1", 1, "2024-05-01T10:01:00Z", "Caroline", "Which one did you pick?"),
        said(3, "s1", 2, "2024-05-01T10:02:00Z", "Melanie", "The rye one from the market."),
        said(4, "s2", 0, "2024-05-11T09:00:00Z", "Caroline", "I baked rye bread on Saturday."),
        said(5, "s2", 1, "2024-05-11T09:01:00Z", "Melanie", "Rye bread is my favourite."),
    ]
}

/// Compiles with the context indexes `config` asks for, built from the corpus as the memory
/// facade builds them (lexical windows, context vectors from the turns' stored vectors).
pub(crate) fn run_with_context(
    built: &Built,
    question: &str,
    as_of: Option<&str>,
    budget: u32,
    config: &CompileConfig,
) -> CompiledContext {
    let params = Bm25Params { k1: config.lexical.k1, b: config.lexical.b };
    let window = WindowIndex::build(
        &built.corpus,
        config.context.lexical_radius,
        params,
        config.lexical.analyzer,
    )
    .unwrap();
    let vectors: Vec<(TurnId, Vec<f32>)> = built
        .corpus
        .evidence()
        .iter()
        .map(|e| {
            let v = bag_of_words(&e.turn.text);
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            (e.id, v.iter().map(|x| x / norm).collect())
        })
        .collect();
    let context_vectors = ContextVectors::build(
        &built.corpus,
        config.context.dense_radius,
        crate::fixture::DIM,
        vectors.len(),
        |id| vectors.iter().find(|(k, _)| *k == id).map(|(_, v)| v.as_slice()),
    );
    let query_vector = bag_of_words(question);
    let dense = match config.dense {
        DenseConfig::Off => None,
        DenseConfig::On { .. } => Some(DenseInput {
            index: &built.dense,
            query_vector: &query_vector,
            encoder: &built.encoder,
            pending: 0,
        }),
    };
    let reader = TiktokenReader::o200k_base();
    let inputs = CompileInputs {
        corpus: &built.corpus,
        lexical: &built.lexical,
        dense,
        also_dense: &[],
        context: ContextInputs {
            lexical: (config.context.lexical_radius > 0).then_some(&window),
            dense: (config.context.dense_radius > 0).then_some(&context_vectors),
        },
        reader: &reader,
        reranker: None,
    };
    compile(&inputs, &query("c", question, as_of, budget), config).unwrap()
}

/// The lists that ranked `record`, packed or excluded.
pub(crate) fn lists_of(context: &CompiledContext, record: u64) -> Vec<Retriever> {
    let item = context.items.iter().find(|i| i.record.raw() == record);
    let excluded = context.excluded.iter().find(|x| x.record.raw() == record);
    let lists = item.map(|i| i.lists.clone()).or(excluded.map(|x| x.lists.clone()));
    lists.unwrap_or_default().iter().map(|l| l.list).collect()
}

/// The plain analyzer (the fixture's BM25 index is built with it) and only `context` on.
pub(crate) fn with_context(context: ContextConfig) -> CompileConfig {
    let mut config = CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 });
    config.context = context;
    config
}

#[test]
fn a_short_turn_is_ranked_by_its_neighbours_words_unless_they_were_said_after_as_of() {
    let built = build("c", chat(), Vec::new());
    let config = with_context(ContextConfig { lexical_radius: 1, dense_radius: 1 });
    let context = run_with_context(&built, "sourdough starter", None, 500, &config);
    let lists = lists_of(&context, 2);
    assert!(lists.contains(&Retriever::LexicalContext), "{}", context.explain());
    assert!(lists.contains(&Retriever::DenseContext), "{}", context.explain());
    assert!(context.explain().contains("context: lexical_context"), "{}", context.explain());

    // As of just after turn 2, its window reaches turn 3, said later: no context list ranks it.
    let context =
        run_with_context(&built, "sourdough starter", Some("2024-05-01T10:01:30Z"), 500, &config);
    let lists = lists_of(&context, 2);
    assert!(!lists.contains(&Retriever::LexicalContext), "{}", context.explain());
    assert!(!lists.contains(&Retriever::DenseContext), "{}", context.explain());
    assert!(context.items.iter().all(|i| i.record.raw() <= 2), "{}", context.explain());

    let off =
        run_with_context(&built, "sourdough starter", None, 500, &with_context(ContextConfig::OFF));
    assert!(
        lists_of(&off, 2)
            .iter()
            .all(|l| !matches!(l, Retriever::LexicalContext | Retriever::DenseContext))
    );
}

#[test]
fn a_named_speaker_gets_companion_lists_of_their_turns_only() {
    let built = build("c", chat(), Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    config.names = NamesConfig::SpeakerLists;
    let context = run_with_context(&built, "What bread does Mel like?", None, 500, &config);
    assert_eq!(context.named_speakers, ["Melanie"]);
    assert!(context.explain().contains("names: the question names Melanie"));
    for item in &context.items {
        let named = lists_of(&context, item.record.raw())
            .iter()
            .any(|l| matches!(l, Retriever::LexicalNamed | Retriever::DenseNamed));
        assert_eq!(named, item.speaker.as_deref() == Some("Melanie"), "{}", context.explain());
    }
    // Naming every speaker filters nothing: no companion lists.
    let both = run_with_context(&built, "Did Melanie and Caroline bake?", None, 500, &config);
    assert!(both.named_speakers.is_empty());
}

#[test]
fn a_time_expression_adds_the_turns_said_since_the_window_start() {
    let built = build("c", chat(), Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    config.time = TimeConfig::WindowList;
    // Resolved against the as-of time, never the clock: last weekend of Monday 13 May 2024.
    let context = run_with_context(
        &built,
        "What rye did I bake last weekend?",
        Some("2024-05-13T12:00:00Z"),
        500,
        &config,
    );
    let window = context.time_window.as_ref().expect("resolved");
    assert_eq!(window.expression, "last weekend");
    assert_eq!(window.start.to_rfc3339(), "2024-05-11T00:00:00Z");
    for record in [1, 2, 3, 4, 5] {
        let in_list = lists_of(&context, record).contains(&Retriever::TimeWindow);
        let ranked = context.items.iter().any(|i| i.record.raw() == record)
            || context.excluded.iter().any(|x| x.record.raw() == record);
        assert_eq!(in_list, ranked && record >= 4, "record {record}: {}", context.explain());
    }
    assert!(context.explain().contains("time window: \"last weekend\""), "{}", context.explain());
}

#[test]
fn the_session_list_lifts_the_turns_of_the_session_where_several_turns_match() {
    let built = build("c", chat(), Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    let question = "rye bread market starter";
    let plain = run_with_context(&built, question, None, 500, &config);
    assert!(
        plain.items.iter().all(|i| !lists_of(&plain, i.record.raw()).contains(&Retriever::Session))
    );
    config.session = SessionConfig::ScoreList { turns: 2, sessions: 1 };
    let context = run_with_context(&built, question, None, 500, &config);
    // One session is listed: every listed turn is of the best-scored session, in fused order.
    let listed: Vec<u64> = [1, 2, 3, 4, 5]
        .into_iter()
        .filter(|&r| lists_of(&context, r).contains(&Retriever::Session))
        .collect();
    assert!(!listed.is_empty(), "{}", context.explain());
    let session_of = |r: u64| built.corpus.get(TurnId::from_raw(r)).unwrap().turn.session.clone();
    assert!(listed.iter().all(|&r| session_of(r) == session_of(listed[0])), "{listed:?}");
    assert!(context.explain().contains("session #1"), "{}", context.explain());
    // Fusing one more list can only raise a listed turn's fused score.
    let score = |c: &CompiledContext, r: u64| {
        c.items.iter().find(|i| i.record.raw() == r).and_then(|i| i.fused_score)
    };
    for r in &listed {
        if let (Some(before), Some(after)) = (score(&plain, *r), score(&context, *r)) {
            assert!(after > before, "record {r}: {before} -> {after}");
        }
    }
    config.session = SessionConfig::ScoreList { turns: 0, sessions: 1 };
    assert!(config.validate().unwrap_err().to_string().contains("session.turns"));
}

#[test]
fn the_long_turn_rule_offers_a_long_turn_after_shorter_ones_it_outscored() {
    let long = format!("Rye bread notes: {}", "I kneaded the rye dough and waited. ".repeat(40));
    let mut records = chat();
    records.push(evidence(6, "c", "s3", 0, Role::User, "2024-05-12T09:00:00Z", &long));
    let built = build("c", records, Vec::new());
    let mut config = CompileConfig::hybrid(10, DenseConfig::Off);
    let fused = run_with_context(&built, "rye bread dough", None, 4000, &config);
    let rank = |c: &CompiledContext, r: u64| {
        c.items.iter().find(|i| i.record.raw() == r).and_then(|i| i.fused_rank).unwrap()
    };
    assert_eq!(rank(&fused, 6), 1, "{}", fused.explain());
    config.long_turns = LongTurns::ScaledByLength { unit_tokens: 100 };
    let scaled = run_with_context(&built, "rye bread dough", None, 4000, &config);
    assert!(rank(&scaled, 6) > rank(&scaled, 4), "{}", scaled.explain());
    let item = scaled.items.iter().find(|i| i.record.raw() == 6).unwrap();
    let divisor = item.length_divisor.expect("a long turn is divided");
    assert!(divisor > 2.0 && (divisor - item.tokens as f32 / 100.0).abs() < 0.5, "{divisor}");
    assert!(
        scaled.items.iter().filter(|i| i.record.raw() != 6).all(|i| i.length_divisor.is_none())
    );
    assert!(scaled.explain().contains("long turn: score /"), "{}", scaled.explain());
}

#[test]
fn the_session_spread_reaches_another_session_before_one_session_fills_the_budget() {
    let records = vec![
        evidence(1, "c", "s1", 0, Role::User, "2024-05-01T10:00:00Z", "I baked rye bread today."),
        evidence(2, "c", "s1", 1, Role::User, "2024-05-01T10:01:00Z", "The rye bread was dense."),
        evidence(3, "c", "s1", 2, Role::User, "2024-05-01T10:02:00Z", "Rye bread again, baked."),
        evidence(4, "c", "s2", 0, Role::User, "2024-05-09T10:00:00Z", "We had rye crackers."),
        evidence(5, "c", "s3", 0, Role::User, "2024-05-10T10:00:00Z", "The weather was nice."),
    ];
    let built = build("c", records, Vec::new());
    let mut config = with_context(ContextConfig::OFF);
    let question = "How many times did I bake rye bread?";
    let packed =
        |c: &CompiledContext| -> Vec<u64> { c.items.iter().map(|i| i.record.raw()).collect() };
    // The plain order offers every turn of s1 before s2's: s2's turn joins s1's best at a larger
    // budget.
    let reaches = |config: &CompileConfig| {
        (20..400)
            .find(|&b| {
                let p = packed(&run_with_context(&built, question, None, b, config));
                p.contains(&1) && p.contains(&4)
            })
            .expect("a large budget packs every turn")
    };
    let plain_budget = reaches(&config);
    config.spread = SessionSpread::PerSession { turns: 1, questions: SpreadQuestions::Aggregating };
    let budget = reaches(&config);
    assert!(budget < plain_budget, "spread {budget}, plain {plain_budget}");
    let plain = run_with_context(&built, question, None, budget, &with_context(ContextConfig::OFF));
    assert!(!packed(&plain).contains(&4), "{}", plain.explain());
    let spread = run_with_context(&built, question, None, budget, &config);
    let explain = spread.explain();
    assert!(explain.contains("spread: deferred behind other sessions"), "{explain}");
    let deferred: Vec<u64> = (spread.items.iter().filter(|i| i.spread_deferred).map(|i| i.record))
        .chain(spread.excluded.iter().filter(|x| x.spread_deferred).map(|x| x.record))
        .map(|r| r.raw())
        .collect();
    assert!(!deferred.is_empty() && deferred.iter().all(|&r| r == 2 || r == 3), "{explain}");
    // A question that does not aggregate keeps the plain order unless the spread is for all.
    let single = "What did I bake on the first of May rye bread";
    let unchanged = run_with_context(&built, single, None, budget, &config);
    let before = run_with_context(&built, single, None, budget, &with_context(ContextConfig::OFF));
    assert_eq!(packed(&unchanged), packed(&before));
    assert!(unchanged.excluded.iter().all(|x| !x.spread_deferred));
    config.spread = SessionSpread::PerSession { turns: 1, questions: SpreadQuestions::All };
    let all = run_with_context(&built, single, None, budget, &config);
    assert!(all.excluded.iter().any(|x| x.spread_deferred), "{}", all.explain());
    config.spread = SessionSpread::PerSession { turns: 0, questions: SpreadQuestions::All };
    assert!(config.validate().unwrap_err().to_string().contains("spread.turns"));
}
