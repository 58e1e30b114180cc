//! The fill after the exact fit: slack the per-piece plan leaves goes to further whole turns.

use evicortex_compiler::{
    CompileConfig, DenseConfig, ExclusionReason, PREAMBLE, ReaderTokenizer, RenderTurn,
    TiktokenReader, render_chronological, session_header, turn_prefix,
};
use evicortex_core::Role;

use crate::fixture::{build, evidence, query, run};

#[test]
fn fill_packs_a_turn_the_plan_left_out_when_the_exact_block_fits() {
    let time = "2024-05-02T10:00:00Z";
    let records = vec![
        evidence(1, "alice", "s1", 0, Role::User, time, "I moved to Lisbon for a bakery job."),
        evidence(2, "alice", "s1", 1, Role::Assistant, time, "A bakery job, how nice."),
        evidence(3, "alice", "s1", 2, Role::User, time, "It opens at 6am, so I wake at 5."),
    ];
    let reader = TiktokenReader::o200k_base();
    let count = |text: &str| reader.count(text).unwrap();
    let (first, second) = (&records[0], &records[1]);
    let both = [first, second].map(|evidence| RenderTurn::whole(evidence, &[]));
    let both_text = render_chronological(&both);
    // The budget is exactly the rendered block of the two best candidates.
    let budget = count(&both_text) as u32;
    // What the plan charges for them: every piece counted apart, which over-counts the block.
    let date = first.turn.time.local_date();
    let planned = count(PREAMBLE)
        + count(&session_header("s1", &date))
        + both
            .iter()
            .map(|t| count(&turn_prefix(t, &date)) + count(&t.evidence.turn.text) + 1)
            .sum::<usize>();
    assert!(planned > budget as usize, "the plan alone admits both: {planned} <= {budget}");

    let built = build("alice", records.clone(), Vec::new());
    let config = CompileConfig::hybrid(5, DenseConfig::Off);
    let context =
        run(&built, &query("alice", "bakery job in Lisbon", None, budget), &config, &reader, None);
    let packed: Vec<u64> = context.items.iter().map(|i| i.record.raw()).collect();
    assert_eq!(packed, [1, 2], "{}", context.explain());
    assert_eq!(context.text, both_text);
    assert_eq!(context.tokens_used, budget);
    assert_eq!(count(&context.text), budget as usize);
    assert!(
        !context
            .excluded
            .iter()
            .any(|x| x.record.raw() != 3 && x.reason == ExclusionReason::Budget),
        "{}",
        context.explain()
    );
}
