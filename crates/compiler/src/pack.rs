//! Packing into the reader's budget: a greedy plan from per-piece counts, then the rendered block
//! counted exactly and trimmed until it fits, then filled with further items while it still fits.
//! Token counts of concatenations are not additive, so only the exact count of the rendered block
//! decides; the plan just keeps trimming and filling short.

use std::{collections::HashSet, hash::Hash};

use evicortex_core::TokenBudget;

use crate::{ReaderTokenizer, ReaderTokenizerError};

/// Greedy admission by estimated cost: the preamble (once, with the first item), a group header
/// (once per new group) and the item's own count. Works for any layout (turns grouped by session,
/// chunks grouped by document), with groups named by any key (the compiler's packer names a
/// session by its index in the corpus: hashing session names cost a quarter of its packing).
#[derive(Debug, Clone)]
pub struct BudgetPlanner<G> {
    budget: usize,
    preamble_tokens: usize,
    used: usize,
    groups: HashSet<G>,
}

impl<G: Hash + Eq + Clone> BudgetPlanner<G> {
    /// A planner for `budget`, with a preamble of `preamble_tokens` paid by the first item.
    pub fn new(budget: TokenBudget, preamble_tokens: usize) -> BudgetPlanner<G> {
        BudgetPlanner {
            budget: budget.tokens() as usize,
            preamble_tokens,
            used: 0,
            groups: HashSet::new(),
        }
    }

    /// Admits an item of `item_tokens` in `group` (whose header costs `header_tokens` if the group
    /// is new) when the estimate stays within the budget. Returns whether it was admitted.
    pub fn try_admit(&mut self, group: &G, header_tokens: usize, item_tokens: usize) -> bool {
        let mut cost = item_tokens;
        if self.used == 0 {
            cost += self.preamble_tokens;
        }
        let new_group = !self.groups.contains(group);
        if new_group {
            cost += header_tokens;
        }
        if self.used + cost > self.budget {
            return false;
        }
        self.used += cost;
        if new_group {
            self.groups.insert(group.clone());
        }
        true
    }

    /// The estimated tokens admitted so far.
    #[cfg(test)]
    pub fn estimated(&self) -> usize {
        self.used
    }
}

/// The result of [`fit_exactly`].
#[derive(Debug, Clone)]
pub struct ExactFit<T> {
    /// The rendered block; empty when nothing fits.
    pub text: String,
    /// Its exact token count, at most the budget.
    pub tokens: usize,
    /// The items kept, in the order given.
    pub kept: Vec<T>,
    /// The items dropped to fit, last-admitted first.
    pub dropped: Vec<T>,
}

/// Renders `chosen` (in priority order) and counts the text exactly; while it exceeds `budget`,
/// drops the last item and renders again. The returned text never exceeds the budget; an empty
/// selection renders to the empty string.
pub fn fit_exactly<T>(
    mut chosen: Vec<T>,
    budget: TokenBudget,
    tokenizer: &dyn ReaderTokenizer,
    render: impl Fn(&[T]) -> String,
) -> Result<ExactFit<T>, ReaderTokenizerError> {
    let mut dropped = Vec::new();
    loop {
        if chosen.is_empty() {
            return Ok(ExactFit { text: String::new(), tokens: 0, kept: chosen, dropped });
        }
        let text = render(&chosen);
        let tokens = tokenizer.count(&text)?;
        if tokens <= budget.tokens() as usize {
            return Ok(ExactFit { text, tokens, kept: chosen, dropped });
        }
        tracing::debug!(
            tokens,
            budget = budget.tokens(),
            "plan over budget after exact count, dropping last item"
        );
        dropped.extend(chosen.pop());
    }
}

/// Offers `extra` items (in the order given) to a fit: each is added when the block rendered with
/// it, counted exactly, stays within `budget`, and left out otherwise. `could_fit(item, slack)`
/// spares the rendering of items that cannot fit in the `slack` tokens left; it only ever skips,
/// never admits. Returns the fit with the added items appended to `kept` (in the order offered).
pub fn fill_exactly<T>(
    mut fit: ExactFit<T>,
    extra: impl IntoIterator<Item = T>,
    budget: TokenBudget,
    tokenizer: &dyn ReaderTokenizer,
    render: impl Fn(&[T]) -> String,
    could_fit: impl Fn(&T, usize) -> bool,
) -> Result<ExactFit<T>, ReaderTokenizerError> {
    let budget = budget.tokens() as usize;
    for item in extra {
        if !could_fit(&item, budget.saturating_sub(fit.tokens)) {
            continue;
        }
        fit.kept.push(item);
        let text = render(&fit.kept);
        let tokens = tokenizer.count(&text)?;
        if tokens <= budget {
            fit.text = text;
            fit.tokens = tokens;
        } else {
            fit.kept.pop();
        }
    }
    Ok(fit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TiktokenReader;

    #[test]
    fn planner_charges_preamble_once_and_headers_per_group() {
        let mut planner = BudgetPlanner::new(TokenBudget::new(20), 5);
        assert!(planner.try_admit(&"a", 3, 4)); // 5 + 3 + 4 = 12
        assert!(planner.try_admit(&"a", 3, 4)); // 16
        assert!(!planner.try_admit(&"b", 3, 2)); // would be 21
        assert!(planner.try_admit(&"a", 3, 4)); // 20
        assert_eq!(planner.estimated(), 20);
    }

    #[test]
    fn fit_exactly_drops_until_the_rendered_text_fits() {
        let t = TiktokenReader::o200k_base();
        let words = vec!["alpha", "beta", "gamma", "delta"];
        let render = |w: &[&str]| w.join(" ");
        let fit = fit_exactly(words.clone(), TokenBudget::new(2), &t, render).unwrap();
        assert!(fit.tokens <= 2, "{fit:?}");
        assert_eq!(fit.tokens, t.count(&fit.text).unwrap());
        assert_eq!(fit.kept.len() + fit.dropped.len(), 4);
        let none = fit_exactly(words, TokenBudget::new(0), &t, render).unwrap();
        assert_eq!((none.text.as_str(), none.tokens, none.kept.len()), ("", 0, 0));
    }

    #[test]
    fn fill_adds_items_while_the_exact_count_fits() {
        let t = TiktokenReader::o200k_base();
        let render = |w: &[&str]| w.join(" ");
        let fit = fit_exactly(vec!["alpha"], TokenBudget::new(3), &t, render).unwrap();
        assert_eq!(fit.tokens, 1);
        // "alpha beta" fits; "alpha beta gamma delta" would be 4 tokens; "alpha beta gamma" fits.
        let extra = ["beta", "gamma delta", "gamma"];
        let filled =
            fill_exactly(fit, extra, TokenBudget::new(3), &t, render, |_, _| true).unwrap();
        assert_eq!(filled.kept, ["alpha", "beta", "gamma"]);
        assert_eq!(filled.text, "alpha beta gamma");
        assert_eq!(filled.tokens, t.count(&filled.text).unwrap());
        assert!(filled.tokens <= 3);
        // The pre-check only skips: refusing everything leaves the fit as it was.
        let fit = fit_exactly(vec!["alpha"], TokenBudget::new(3), &t, render).unwrap();
        let none = fill_exactly(fit, extra, TokenBudget::new(3), &t, render, |_, _| false).unwrap();
        assert_eq!((none.kept.len(), none.text.as_str()), (1, "alpha"));
    }
}
