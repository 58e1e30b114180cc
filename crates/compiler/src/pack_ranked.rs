//! Packing evidence someone else ranked (a baseline, a control) with the compiler's own layout
//! and exact count, so that every system of a comparison pays for the same preamble, session
//! headers and citations: items are offered best first, and one is kept when the whole block
//! rendered with it still counts at most the budget in the reader's tokenizer.

use evicortex_core::TokenBudget;

use crate::{
    Layout, ReaderTokenizer, ReaderTokenizerError,
    reader_tokens::LineCachedCount,
    render::{RenderTurn, render_block},
};

/// Whether packing goes on past an item that does not fit.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PackPolicy {
    /// Skip what does not fit and keep offering later items (retrieval systems).
    SkipWhatDoesNotFit,
    /// Stop at the first item that does not fit (a contiguous window, such as full history).
    StopAtFirstMiss,
}

/// What [`pack_ranked`] kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankedPack {
    /// Indexes of the items kept, in the order offered.
    pub included: Vec<usize>,
    /// The rendered block (in the layout asked for).
    pub text: String,
    /// Its exact count in the reader's tokenizer.
    pub tokens: usize,
}

/// Packs `items` (each a turn, or the parts of turns a chunk holds; best first) into `budget`
/// reader tokens rendered in `layout`, or every item without a budget.
pub fn pack_ranked(
    items: &[Vec<RenderTurn<'_>>],
    budget: Option<TokenBudget>,
    reader: &dyn ReaderTokenizer,
    layout: Layout,
    policy: PackPolicy,
) -> Result<RankedPack, ReaderTokenizerError> {
    let render = |included: &[usize]| {
        let turns: Vec<RenderTurn<'_>> =
            included.iter().flat_map(|&i| items[i].iter().copied()).collect();
        render_block(&turns, layout)
    };
    let cached = LineCachedCount::new(reader, None);
    let counter: &dyn ReaderTokenizer = match &cached {
        Some(cached) => cached,
        None => reader,
    };
    let Some(budget) = budget else {
        let included: Vec<usize> = (0..items.len()).collect();
        let text = render(&included);
        return Ok(RankedPack { tokens: counter.count(&text)?, included, text });
    };
    let budget = budget.tokens() as usize;
    let mut pack = RankedPack { included: Vec::new(), text: String::new(), tokens: 0 };
    for (i, item) in items.iter().enumerate() {
        // A line costs at least its text (the citation prefix outweighs what the text can merge
        // with at its ends): skip rendering items whose texts alone exceed the slack.
        let mut floor = 0;
        for turn in item {
            floor += counter.count(turn.text())?;
        }
        let mut fits = false;
        if floor <= budget.saturating_sub(pack.tokens) {
            pack.included.push(i);
            let text = render(&pack.included);
            let tokens = counter.count(&text)?;
            if tokens <= budget {
                (pack.text, pack.tokens, fits) = (text, tokens, true);
            } else {
                pack.included.pop();
            }
        }
        if !fits && policy == PackPolicy::StopAtFirstMiss {
            break;
        }
    }
    Ok(pack)
}
