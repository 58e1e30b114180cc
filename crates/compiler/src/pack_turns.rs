//! Packing turns: greedy selection in fused order (or the long-turn rule's, then spread over
//! sessions) from per-piece estimates, each selected turn
//! followed by its adjacent turns when expansion is on, the exact fit of the rendered block, then
//! a fill of the slack the estimates left.

use std::collections::{HashMap, HashSet, hash_map::Entry};

use evicortex_core::{TurnId, TurnIndex};

use crate::{
    Admission, BudgetParts, BudgetPlanner, CompileConfig, CompileError, CompileInputs,
    CompileQuery, Corpus, Excerpt, ExcerptConfig, Expansion, FusedHit, LongTurns, Selection,
    fill_exactly, fit_exactly,
    measure::{CountCaches, Premeasured, expected_header_time, line_reader, measure_turn},
    render::{PREAMBLE, RenderTurn, layout_prefix, render_block, turn_order},
    spread,
};

pub(crate) struct Chosen {
    pub(crate) pos: usize,
    pub(crate) also_cited: Vec<TurnId>,
    pub(crate) selection: Selection,
    /// Estimated tokens of the turn's line (prefix, text and newline counted apart).
    pub(crate) tokens: u32,
    /// Exact tokens of the text alone (of the excerpt's, ellipses included, for an excerpt).
    text_tokens: u32,
    /// The part of a long turn offered in its place.
    pub(crate) excerpt: Option<Excerpt>,
}

impl Chosen {
    /// The turn as rendered.
    fn render<'c>(&'c self, corpus: &'c Corpus) -> RenderTurn<'c> {
        let e = corpus.at(self.pos);
        RenderTurn {
            evidence: e,
            also_cited: &self.also_cited,
            excerpt: self.excerpt.map(|x| x.of(&e.turn.text)),
            cut: self.excerpt,
        }
    }
}

pub(crate) struct Packed {
    /// In rendered order.
    pub(crate) chosen: Vec<Chosen>,
    /// Candidates left out for the budget.
    pub(crate) over_budget: HashSet<TurnId>,
    pub(crate) text: String,
    pub(crate) tokens: u32,
    /// The text's preamble, session headers and turn lines, as counted (`None`: nothing chosen).
    pub(crate) budget_parts: Option<BudgetParts>,
    /// What the long-turn rule divided each candidate's fused score by, where more than 1.
    pub(crate) divisors: HashMap<TurnId, f32>,
    /// Candidates the session spread moved behind other sessions' candidates.
    pub(crate) deferred: HashSet<TurnId>,
}

/// Packs under read locks of the corpus's count caches, so compiles of one namespace pack side
/// by side, then adds what this pack counted under the write locks.
pub(crate) fn pack(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    fused: &mut Vec<FusedHit<TurnId>>,
    admission: &Admission<'_>,
    representative: impl Fn(TurnId) -> TurnId,
    premeasured: Premeasured,
) -> Result<Packed, CompileError> {
    let _span = tracing::debug_span!("pack", budget = query.budget.tokens()).entered();
    let corpus = inputs.corpus;
    let Premeasured { turns: mut measured, counts } = premeasured;
    let caches = CountCaches::read(corpus);
    // Every block the fit and the fill count shares most lines with the previous one.
    let (mut turn_counts, line_cached) = caches.counters(inputs.reader, counts);
    let reader = line_reader(&line_cached, inputs.reader);
    let preamble_tokens = reader.count(PREAMBLE)?;
    let mut planner = BudgetPlanner::new(query.budget, preamble_tokens);

    // Each candidate is measured up to three times (the long-turn rule, the greedy pass, the
    // fill); what depends only on the turn is computed once, or was before the pack.
    // A long turn's excerpt with its text's and line's tokens, by position.
    let mut cuts: HashMap<usize, (Excerpt, u32, u32)> = HashMap::new();
    // A turn whose text is longer than this is offered as an excerpt.
    let share = match config.excerpts {
        ExcerptConfig::Matched { budget_share } => {
            (f64::from(query.budget.tokens()) * f64::from(budget_share)) as u32
        }
        ExcerptConfig::Off => u32::MAX,
    };
    // The turn as a `Chosen`, and the tokens of its session header.
    let mut measure = |pos: usize, selection: Selection| -> Result<(Chosen, usize), CompileError> {
        let m = match measured.entry(pos) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => slot.insert(measure_turn(
                corpus,
                admission,
                config.dedup,
                config.layout,
                reader,
                &mut turn_counts,
                pos,
            )?),
        };
        let mut chosen = Chosen {
            pos,
            also_cited: m.also_cited.clone(),
            selection,
            tokens: m.tokens,
            text_tokens: m.text_tokens,
            excerpt: None,
        };
        if m.text_tokens > share.max(1) {
            let (excerpt, text_tokens, tokens) = match cuts.entry(pos) {
                Entry::Occupied(slot) => *slot.get(),
                Entry::Vacant(slot) => *slot.insert(cut_long_turn(
                    inputs,
                    &query.question,
                    config.layout,
                    reader,
                    &mut chosen,
                    share.max(1),
                )?),
            };
            (chosen.excerpt, chosen.text_tokens, chosen.tokens) =
                (Some(excerpt), text_tokens, tokens);
        }
        Ok((chosen, m.header))
    };
    // The long-turn rule: offered in order of fused score / max(1, line tokens / unit).
    let divisors = match config.long_turns {
        LongTurns::ScaledByLength { unit_tokens } => {
            scale_by_length(fused, admission, unit_tokens, &mut measure)?
        }
        _ => HashMap::new(),
    };
    let deferred = reorder_for_breadth(fused, inputs, config, &query.question, admission);
    // Takes the turn if its text is within `max_text_tokens` and its line fits the plan.
    let mut try_take = |pos: usize,
                        selection: Selection,
                        max_text_tokens: Option<u32>,
                        chosen: &mut Vec<Chosen>|
     -> Result<bool, CompileError> {
        let (candidate, header) = measure(pos, selection)?;
        if max_text_tokens.is_some_and(|max| candidate.text_tokens > max) {
            return Ok(false);
        }
        if planner.try_admit(&corpus.session_index(pos), header, candidate.tokens as usize) {
            chosen.push(candidate);
            Ok(true)
        } else {
            Ok(false)
        }
    };

    let (chosen, mut over_budget) =
        greedy_pass(fused, corpus, admission, &representative, config.expansion, &mut try_take)?;

    let render = |chosen: &[Chosen]| {
        let turns: Vec<RenderTurn<'_>> = chosen.iter().map(|c| c.render(corpus)).collect();
        render_block(&turns, config.layout)
    };
    let fit = fit_exactly(chosen, query.budget, reader, render)?;
    let dropped = fit.dropped.iter().filter(|d| d.selection == Selection::Candidate);
    over_budget.extend(dropped.map(|d| corpus.at(d.pos).id));

    // The plan charged every piece apart, which over-counts the joined block, so the exact fit
    // usually leaves slack: offer it to the remaining candidates, best fused rank first, each a
    // whole turn admitted only if the block re-counted exactly still fits. Candidates only: the
    // expansion ran with the plan's seeds and is not repeated for filled turns.
    let kept: HashSet<TurnId> = fit.kept.iter().map(|c| corpus.at(c.pos).id).collect();
    let mut extra = Vec::new();
    for hit in fused.iter() {
        let Some(pos) = admission.position(hit.key) else { continue };
        if !kept.contains(&hit.key) {
            extra.push(measure(pos, Selection::Candidate)?.0);
        }
    }
    // A turn's line costs at least its text: the citation prefix outweighs what the text can
    // merge with at its two ends. Rendering is skipped for turns that cannot fit by that bound.
    let could_fit = |c: &Chosen, slack: usize| c.text_tokens as usize <= slack;
    let fit = fill_exactly(fit, extra, query.budget, reader, render, could_fit)?;
    for c in &fit.kept {
        over_budget.remove(&corpus.at(c.pos).id);
    }

    let mut chosen = fit.kept;
    // Same order as the rendered text: session of first appearance, then time.
    chosen.sort_by(|a, b| turn_order(corpus.at(a.pos)).cmp(&turn_order(corpus.at(b.pos))));
    let chosen = order_as_rendered(corpus, chosen);
    let budget_parts = budget_parts(
        corpus,
        &chosen,
        |pos| measured.get(&pos).map_or(0, |m| m.header as u32),
        preamble_tokens as u32,
    );
    let counted = turn_counts.into_counts(line_cached);
    drop(caches);
    corpus.add_counts(inputs.reader.name(), counted.turns, counted.lines);
    Ok(Packed {
        chosen,
        over_budget,
        text: fit.text,
        tokens: fit.tokens as u32,
        budget_parts,
        divisors,
        deferred,
    })
}

/// The spread over sessions and the facets' coverage, where the question asks for them: the
/// candidates the spread moved behind other sessions' candidates.
fn reorder_for_breadth(
    fused: &mut Vec<FusedHit<TurnId>>,
    inputs: &CompileInputs<'_>,
    config: &CompileConfig,
    question: &str,
    admission: &Admission<'_>,
) -> HashSet<TurnId> {
    let corpus = inputs.corpus;
    let deferred = match spread::applies(config.spread, question) {
        Some(turns) => spread::spread_over_sessions(fused, corpus, admission, turns),
        None => HashSet::new(),
    };
    if let Some(weight) = spread::coverage_applies(config.coverage, question) {
        crate::coverage::cover_facets(
            fused,
            corpus,
            admission,
            inputs.lexical,
            question,
            weight,
            config.rrf_k,
        );
    }
    deferred
}

/// The greedy pass in `fused` order, each taken candidate followed by its expansion: the turns
/// taken, and the candidates left out for the budget.
fn greedy_pass(
    fused: &[FusedHit<TurnId>],
    corpus: &Corpus,
    admission: &Admission<'_>,
    representative: &impl Fn(TurnId) -> TurnId,
    expansion: Expansion,
    try_take: &mut impl FnMut(
        usize,
        Selection,
        Option<u32>,
        &mut Vec<Chosen>,
    ) -> Result<bool, CompileError>,
) -> Result<(Vec<Chosen>, HashSet<TurnId>), CompileError> {
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut taken: HashSet<TurnId> = HashSet::new();
    let mut over_budget = HashSet::new();
    let (radius, max_tokens) = match expansion {
        Expansion::None => (0, None),
        Expansion::AdjacentTurns { radius, max_tokens } => (radius, max_tokens),
    };
    // Only expansion asks whether a turn was retrieved.
    let retrieved: HashSet<TurnId> =
        if radius > 0 { fused.iter().map(|h| h.key).collect() } else { HashSet::new() };
    // Each candidate's neighbours are offered right after it, while the budget still has room:
    // offered after all candidates, they would never fit at any budget the candidates fill.
    for hit in fused {
        let Some(pos) = admission.position(hit.key) else { continue };
        if taken.contains(&hit.key) {
            continue;
        }
        if !try_take(pos, Selection::Candidate, None, &mut chosen)? {
            over_budget.insert(hit.key);
            continue;
        }
        taken.insert(hit.key);
        for (n, id) in expansion_of(corpus, admission, representative, pos, radius) {
            if taken.contains(&id) {
                continue;
            }
            // A neighbour that was retrieved too keeps saying so.
            let selection = if retrieved.contains(&id) {
                Selection::Candidate
            } else {
                Selection::Expansion { of: hit.key }
            };
            if try_take(n, selection, max_tokens, &mut chosen)? {
                taken.insert(id);
            }
        }
    }
    Ok((chosen, over_budget))
}

/// A long turn's best excerpt within `max_tokens` of text, set on `chosen`, with the tokens of
/// the text shown and of the whole line.
fn cut_long_turn(
    inputs: &CompileInputs<'_>,
    question: &str,
    layout: crate::Layout,
    reader: &dyn crate::ReaderTokenizer,
    chosen: &mut Chosen,
    max_tokens: u32,
) -> Result<(Excerpt, u32, u32), CompileError> {
    let corpus = inputs.corpus;
    let pos = chosen.pos;
    let text = &corpus.at(pos).turn.text;
    let excerpt = crate::excerpt::best_run(text, question, inputs.lexical, reader, max_tokens)?;
    chosen.excerpt = Some(excerpt);
    let turn = chosen.render(corpus);
    let at = expected_header_time(corpus, pos);
    let prefix = reader.count(&layout_prefix(layout, &turn, at))?;
    let mut shown = String::new();
    turn.write_text(&mut shown);
    let text_tokens = u32::try_from(reader.count(&shown)?).unwrap_or(u32::MAX);
    let prefix = u32::try_from(prefix).unwrap_or(u32::MAX);
    Ok((excerpt, text_tokens, prefix.saturating_add(text_tokens) + 1))
}

/// The long-turn rule: `fused` reordered by fused score / max(1, line tokens / unit); what each
/// candidate's score was divided by, where more than 1.
fn scale_by_length(
    fused: &mut Vec<FusedHit<TurnId>>,
    admission: &Admission<'_>,
    unit_tokens: u32,
    measure: &mut impl FnMut(usize, Selection) -> Result<(Chosen, usize), CompileError>,
) -> Result<HashMap<TurnId, f32>, CompileError> {
    let mut divisors = HashMap::new();
    let mut scaled = Vec::with_capacity(fused.len());
    for hit in fused.iter() {
        let divisor = match admission.position(hit.key) {
            Some(pos) => {
                let tokens = measure(pos, Selection::Candidate)?.0.tokens;
                (tokens as f32 / unit_tokens as f32).max(1.0)
            }
            None => 1.0,
        };
        if divisor > 1.0 {
            divisors.insert(hit.key, divisor);
        }
        scaled.push((hit.score / f64::from(divisor), hit.clone()));
    }
    scaled.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.key.cmp(&b.1.key)));
    *fused = scaled.into_iter().map(|(_, hit)| hit).collect();
    Ok(divisors)
}

/// The turns expansion offers after the one at `pos`, nearest first, with their ids: admitted
/// ones that are their own representative, within `radius` turns in its session.
fn expansion_of(
    corpus: &Corpus,
    admission: &Admission<'_>,
    representative: &impl Fn(TurnId) -> TurnId,
    pos: usize,
    radius: u32,
) -> Vec<(usize, TurnId)> {
    let seed_turn = corpus.at(pos).turn.turn.raw();
    let mut offered = Vec::new();
    for distance in 1..=radius {
        for neighbour in
            [seed_turn.checked_sub(distance), seed_turn.checked_add(distance)].into_iter().flatten()
        {
            for n in neighbours(corpus, pos, TurnIndex::new(neighbour)) {
                let id = corpus.at(n).id;
                if admission.admits(id) && representative(id) == id {
                    offered.push((n, id));
                }
            }
        }
    }
    offered
}

/// The parts as measured: each session's header is the one its first turn measured.
fn budget_parts(
    corpus: &Corpus,
    chosen: &[Chosen],
    header_of: impl Fn(usize) -> u32,
    preamble: u32,
) -> Option<BudgetParts> {
    (!chosen.is_empty()).then(|| {
        let mut sessions = HashSet::new();
        let headers = chosen
            .iter()
            .filter(|c| sessions.insert(&corpus.at(c.pos).turn.session))
            .map(|c| header_of(c.pos))
            .fold(0u32, u32::saturating_add);
        BudgetParts {
            preamble,
            headers,
            evidence: chosen.iter().fold(0u32, |sum, c| sum.saturating_add(c.tokens)),
        }
    })
}

/// Positions of the turns with index `turn` in the session of `seed`.
fn neighbours(corpus: &Corpus, seed: usize, turn: TurnIndex) -> Vec<usize> {
    let session = corpus.session_of(seed);
    let start = session.partition_point(|&p| corpus.at(p as usize).turn.turn < turn);
    session[start..]
        .iter()
        .take_while(|&&p| corpus.at(p as usize).turn.turn == turn)
        .map(|&p| p as usize)
        .collect()
}

/// Groups time-ordered items by session in order of each session's first turn, as rendered.
fn order_as_rendered(corpus: &Corpus, chosen: Vec<Chosen>) -> Vec<Chosen> {
    let mut sessions: Vec<(String, Vec<Chosen>)> = Vec::new();
    for c in chosen {
        let session = corpus.at(c.pos).turn.session.as_str();
        match sessions.iter_mut().find(|(s, _)| s == session) {
            Some((_, members)) => members.push(c),
            None => sessions.push((session.to_owned(), vec![c])),
        }
    }
    sessions.into_iter().flat_map(|(_, members)| members).collect()
}
