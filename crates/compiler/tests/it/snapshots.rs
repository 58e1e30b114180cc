//! Snapshots of compiled contexts: the rendered text and the explained manifest.

use evicortex_compiler::{
    CompileConfig, DenseConfig, Expansion, RerankConfig, SupportSignal, TiktokenReader,
};
use expect_test::{Expect, expect};

use crate::fixture::{TermOverlapReranker, build, conversation, query, run};

#[track_caller]
fn check(question: &str, as_of: Option<&str>, budget: u32, config: &CompileConfig, expect: Expect) {
    let (records, erased) = conversation();
    let built = build("alice", records, erased);
    let reader = TiktokenReader::o200k_base();
    let reranker = TermOverlapReranker;
    let reranker = matches!(config.rerank, RerankConfig::On { .. })
        .then_some(&reranker as &dyn evicortex_compiler::Reranker);
    let context = run(&built, &query("alice", question, as_of, budget), config, &reader, reranker);
    assert!(context.tokens_used <= budget);
    expect.assert_eq(&format!("{}---\n{}", context.text, context.explain()));
}

#[test]
fn lexical_only_cites_turns_grouped_by_session() {
    check(
        "Where did I move for the bakery job?",
        None,
        120,
        &CompileConfig::hybrid(5, DenseConfig::Off),
        expect![[r#"
            Evidence from memory, oldest first. Cite as [#record].

            Session s1 (2024-05-02):
            [#1] 10:00 user: I just moved to Lisbon for a new job at a bakery.
            [#2 #7] 10:00 assistant: Congratulations on the move!
            [#3] 10:01 user: The bakery opens at 6am, so I wake up at 5.

            Session s2 (2024-06-10):
            [#6] 18:00 assistant: How nice! Did you show her the bakery?
            ---
            namespace alice | budget 120 o200k_base | used 117 | support 0.4394 (LexicalCoverage) | abstain no
            record      fused      lexical        dense       rerank tokens  contributions
            #1              1      1:4.658            -            -     24  retrieval only
            #2              3      3:2.545            -            -     18  retrieval only
            #3              4      4:1.977            -            -     27  retrieval only
            #6              2      2:3.400            -            -     21  retrieval only
            excluded #7       fused    - lexical            - dense            -  duplicate of #2
        "#]],
    );
}

#[test]
fn hybrid_with_reranker_and_expansion_and_dedup() {
    let mut config = CompileConfig::hybrid(5, DenseConfig::On { top_n: 5 });
    config.rerank = RerankConfig::On { depth: 4, weight: 1.0 };
    config.expansion = Expansion::AdjacentTurns { radius: 1, max_tokens: None };
    check(
        "congratulations on the move to Lisbon",
        None,
        200,
        &config,
        expect![[r#"
            Evidence from memory, oldest first. Cite as [#record].

            Session s1 (2024-05-02):
            [#1] 10:00 user: I just moved to Lisbon for a new job at a bakery.
            [#2 #7] 10:00 assistant: Congratulations on the move!
            [#3] 10:01 user: The bakery opens at 6am, so I wake up at 5.

            Session s2 (2024-06-10):
            [#5] 18:00 user: My sister Ana visited me in Lisbon last weekend.
            [#6] 18:00 assistant: How nice! Did you show her the bakery?

            Session s3 (2024-09-01):
            [#8] 08:00 user: I left the bakery and started at gpt-4o evaluation work, v2.3.1 of the harness.
            ---
            namespace alice | budget 200 o200k_base | used 181 | support 0.8165 (MaxDenseCosine) | abstain no
            dense index: exact
            record      fused      lexical        dense       rerank tokens  contributions
            #1              2      2:2.105      3:0.327      2:0.333     24  reranker: #2 (0.333)
            #2              1      1:6.101      1:0.816      1:0.667     18  reranker: #1 (0.667)
            #3              4            -      2:0.369      4:0.167     27  reranker: #4 (0.167)
            #5              5      3:1.034            -            -     21  retrieval only
            #6              -            -            -            -     21  neighbour of #5
            #8              3      4:0.701      4:0.261      3:0.167     36  reranker: #3 (0.167)
            excluded #7       fused    - lexical            - dense            -  duplicate of #2
        "#]],
    );
}

#[test]
fn as_of_hides_later_turns_and_reports_them_filtered() {
    let mut config = CompileConfig::hybrid(5, DenseConfig::Off);
    config.report_filtered = true;
    check(
        "bakery",
        Some("2024-06-01T00:00:00Z"),
        200,
        &config,
        expect![[r#"
            Evidence from memory, oldest first. Cite as [#record].

            Session s1 (2024-05-02):
            [#1] 10:00 user: I just moved to Lisbon for a new job at a bakery.
            [#3] 10:01 user: The bakery opens at 6am, so I wake up at 5.
            ---
            namespace alice | budget 200 o200k_base | used 71 | support 1.0000 (LexicalCoverage) | abstain no
            record      fused      lexical        dense       rerank tokens  contributions
            #1              2      2:0.690            -            -     24  retrieval only
            #3              1      1:0.719            -            -     27  retrieval only
            excluded #6       fused    - lexical      1:0.824 dense            -  filtered: said after the as-of time
            excluded #8       fused    - lexical      4:0.638 dense            -  filtered: said after the as-of time
        "#]],
    );
}

#[test]
fn abstains_below_threshold_with_the_reason() {
    let mut config = CompileConfig::hybrid(5, DenseConfig::Off);
    config.abstention.signal = SupportSignal::LexicalCoverage;
    config.abstention.threshold = Some(0.9);
    check(
        "what is my favourite bakery pastry in Porto",
        None,
        200,
        &config,
        expect![[r#"
            ---
            namespace alice | budget 200 o200k_base | used 0 | support 0.1828 (LexicalCoverage) | abstain yes: support 0.1828 is below the threshold 0.9
            record      fused      lexical        dense       rerank tokens  contributions
            excluded #5       fused    1 lexical      1:3.233 dense            -  abstained
            excluded #6       fused    2 lexical      2:0.824 dense            -  abstained
            excluded #3       fused    3 lexical      3:0.719 dense            -  abstained
            excluded #1       fused    4 lexical      4:0.690 dense            -  abstained
            excluded #8       fused    5 lexical      5:0.638 dense            -  abstained
        "#]],
    );
}

#[test]
fn abstains_without_candidates_and_never_shows_erased_text() {
    check(
        "bank PIN",
        None,
        200,
        &CompileConfig::hybrid(5, DenseConfig::Off),
        expect![[r#"
            ---
            namespace alice | budget 200 o200k_base | used 0 | support none (LexicalCoverage) | abstain yes: no candidates (nothing in the namespace matches the question)
            record      fused      lexical        dense       rerank tokens  contributions
        "#]],
    );
}

#[test]
fn tiny_budget_packs_nothing_and_says_so() {
    check(
        "Lisbon",
        None,
        12,
        &CompileConfig::hybrid(5, DenseConfig::Off),
        expect![[r#"
            ---
            namespace alice | budget 12 o200k_base | used 0 | support 1.0000 (LexicalCoverage) | abstain yes: nothing fits the budget with its header and citation
            record      fused      lexical        dense       rerank tokens  contributions
            excluded #5       fused    1 lexical      1:1.034 dense            -  over budget
            excluded #1       fused    2 lexical      2:0.907 dense            -  over budget
        "#]],
    );
}

/// Expansion runs beside each selected candidate, so a neighbour fits ahead of lower-ranked
/// candidates when the candidates alone would fill the budget.
#[test]
fn expansion_takes_a_neighbour_ahead_of_lower_ranked_candidates() {
    let (records, erased) = conversation();
    let built = build("alice", records, erased);
    let reader = TiktokenReader::o200k_base();
    let question = query("alice", "Where did I move for the bakery job?", None, 140);
    let mut config = CompileConfig::hybrid(5, DenseConfig::Off);
    let plain = run(&built, &question, &config, &reader, None);
    config.expansion = Expansion::AdjacentTurns { radius: 1, max_tokens: None };
    let expanded = run(&built, &question, &config, &reader, None);
    let selected = |c: &evicortex_compiler::CompiledContext| -> Vec<(String, String)> {
        c.items.iter().map(|i| (i.citation.clone(), format!("{:?}", i.selected_by))).collect()
    };
    let (plain, expanded_items) = (selected(&plain), selected(&expanded));
    assert!(!plain.iter().any(|(c, _)| c == "#5"), "{plain:?}");
    assert!(expanded.tokens_used <= 140);
    let five = expanded_items.iter().find(|(c, _)| c == "#5");
    assert!(
        five.is_some_and(|(_, s)| s.starts_with("Expansion")),
        "#5, the neighbour of the second-ranked #6, is packed as its expansion: {expanded_items:?}"
    );
    // A cap below #5's text keeps it out; a cap at it lets it in.
    let five = expanded.items.iter().find(|i| i.citation == "#5").unwrap();
    let n = evicortex_compiler::ReaderTokenizer::count(&reader, &five.text).unwrap() as u32;
    for (cap, packed) in [(n - 1, false), (n, true)] {
        config.expansion = Expansion::AdjacentTurns { radius: 1, max_tokens: Some(cap) };
        let capped = selected(&run(&built, &question, &config, &reader, None));
        assert_eq!(capped.iter().any(|(c, _)| c == "#5"), packed, "cap {cap}: {capped:?}");
    }
}
