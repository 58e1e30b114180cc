//! Stage 6: selection (in the long-turn rule's order), expansion and exact packing, and the
//! account of every candidate: each packed one as an item, each left out with its reason.

use std::collections::{HashMap, HashSet};

use evicortex_core::TurnId;

use crate::{
    AbstainReason, BudgetParts, CompileConfig, CompileError, CompileInputs, CompileQuery,
    ContextItem, DenseConfig, ExcludedCandidate, ExclusionReason, ListRank, RankScore, Retriever,
    filter::Admission, measure::Premeasured, pack_turns::pack,
};

use super::fusion_stage::Fusion;

/// What the pack put in the context and what it left out.
pub(super) struct Assembled {
    pub(super) items: Vec<ContextItem>,
    pub(super) excluded: Vec<ExcludedCandidate>,
    pub(super) text: String,
    pub(super) tokens_used: u32,
    pub(super) budget_parts: Option<BudgetParts>,
    pub(super) abstain_reason: Option<AbstainReason>,
}

/// Packs `fusion`'s candidates unless it abstained; every candidate is accounted for.
pub(super) fn assemble(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    admission: &Admission<'_>,
    representative: &impl Fn(TurnId) -> TurnId,
    fusion: &mut Fusion,
    premeasured: Premeasured,
) -> Result<Assembled, CompileError> {
    let corpus = inputs.corpus;
    let (lists, rank_of) = (&fusion.lists, &fusion.rank_of);
    let ranks = |id: TurnId| {
        let lists: Vec<ListRank> = lists
            .iter()
            .filter(|l| !matches!(l.retriever, Retriever::Lexical | Retriever::Dense))
            .filter_map(|l| {
                let r = rank_of.get(&(l.retriever, id))?;
                Some(ListRank { list: l.retriever, rank: r.rank, score: r.score })
            })
            .collect();
        (
            rank_of.get(&(Retriever::Lexical, id)).copied(),
            rank_of.get(&(Retriever::Dense, id)).copied(),
            lists,
        )
    };
    let found = &fusion.found;
    let linked_by = |id: TurnId| -> Vec<crate::LinkName> {
        let (Some(report), Some(by)) = (&found.report, found.links.get(&id)) else {
            return Vec::new();
        };
        by.iter().filter_map(|&i| report.names.get(i).cloned()).collect()
    };
    let mut excluded: Vec<ExcludedCandidate> = fusion
        .duplicates
        .iter()
        .map(|d| ExcludedCandidate {
            record: d.key,
            reason: ExclusionReason::Duplicate { of: d.kept },
            lexical: None,
            dense: None,
            lists: Vec::new(),
            fused_rank: None,
            length_divisor: None,
            spread_deferred: false,
        })
        .collect();
    let mut assembled = Assembled {
        items: Vec::new(),
        excluded: Vec::new(),
        text: String::new(),
        tokens_used: 0,
        budget_parts: None,
        abstain_reason: fusion.abstain_reason.clone(),
    };
    let fused = &mut fusion.fused;
    if assembled.abstain_reason.is_some() {
        for (i, hit) in fused.iter().enumerate() {
            let (lexical, dense, lists) = ranks(hit.key);
            excluded.push(ExcludedCandidate {
                record: hit.key,
                reason: ExclusionReason::Abstained,
                lexical,
                dense,
                lists,
                fused_rank: Some(i as u32 + 1),
                length_divisor: None,
                spread_deferred: false,
            });
        }
    } else {
        let packed = pack(inputs, query, config, fused, admission, representative, premeasured)?;
        for (i, hit) in fused.iter().enumerate() {
            if packed.over_budget.contains(&hit.key) {
                let (lexical, dense, lists) = ranks(hit.key);
                excluded.push(ExcludedCandidate {
                    record: hit.key,
                    reason: ExclusionReason::Budget,
                    lexical,
                    dense,
                    lists,
                    fused_rank: Some(i as u32 + 1),
                    length_divisor: packed.divisors.get(&hit.key).copied(),
                    spread_deferred: packed.deferred.contains(&hit.key),
                });
            }
        }
        if packed.chosen.is_empty() {
            assembled.abstain_reason = Some(AbstainReason::NothingFits);
        }
        let fused_pos: HashMap<TurnId, usize> =
            fused.iter().enumerate().map(|(i, h)| (h.key, i)).collect();
        for chosen in &packed.chosen {
            let e = corpus.at(chosen.pos);
            let fused_at = fused_pos.get(&e.id).copied();
            let (lexical, dense, lists) = ranks(e.id);
            assembled.items.push(ContextItem {
                citation: format!("#{}", e.id.raw()),
                record: e.id,
                digest: e.digest,
                session: e.turn.session.clone(),
                turn: e.turn.turn,
                time: e.turn.time,
                role: e.turn.role,
                speaker: e.turn.speaker.clone(),
                text: chosen.excerpt.map_or(&e.turn.text[..], |x| x.of(&e.turn.text)).to_owned(),
                excerpt: chosen.excerpt,
                also_cited: chosen.also_cited.clone(),
                selected_by: chosen.selection.clone(),
                lexical,
                dense,
                rerank: fusion.rerank_of.get(&e.id).copied(),
                lists,
                linked_by: linked_by(e.id),
                fused_rank: fused_at.map(|i| i as u32 + 1),
                fused_score: fused_at.map(|i| fused[i].score),
                length_divisor: packed.divisors.get(&e.id).copied(),
                spread_deferred: packed.deferred.contains(&e.id),
                tokens: chosen.tokens,
            });
        }
        assembled.text = packed.text;
        assembled.tokens_used = packed.tokens;
        assembled.budget_parts = packed.budget_parts;
    }
    if config.report_filtered {
        excluded.extend(filtered_candidates(inputs, query, config, admission)?);
    }
    assembled.excluded = excluded;
    Ok(assembled)
}

/// Candidates of the unfiltered top-N that the filters removed, with the reason.
fn filtered_candidates(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    admission: &Admission<'_>,
) -> Result<Vec<ExcludedCandidate>, CompileError> {
    let everything = |_: TurnId| true;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    if config.lexical.top_n > 0 {
        let hits = inputs.lexical.search(
            &inputs.lexical.analyze(&query.question),
            config.lexical.top_n,
            everything,
        );
        for (i, h) in hits.iter().enumerate() {
            if let Some(filter) = admission.reason(h.key)
                && seen.insert(h.key)
            {
                out.push(ExcludedCandidate {
                    record: h.key,
                    reason: ExclusionReason::Filtered { filter },
                    lexical: Some(RankScore { rank: i as u32 + 1, score: h.score }),
                    dense: None,
                    lists: Vec::new(),
                    fused_rank: None,
                    length_divisor: None,
                    spread_deferred: false,
                });
            }
        }
    }
    if let (DenseConfig::On { top_n }, Some(dense)) = (config.dense, inputs.dense) {
        let hits = dense.index.search(dense.query_vector, top_n, &mut |_| true)?;
        for (i, h) in hits.iter().enumerate() {
            let rank = RankScore { rank: i as u32 + 1, score: h.score };
            if let Some(filter) = admission.reason(h.key) {
                if seen.insert(h.key) {
                    out.push(ExcludedCandidate {
                        record: h.key,
                        reason: ExclusionReason::Filtered { filter },
                        lexical: None,
                        dense: Some(rank),
                        lists: Vec::new(),
                        fused_rank: None,
                        length_divisor: None,
                        spread_deferred: false,
                    });
                } else if let Some(existing) = out.iter_mut().find(|x| x.record == h.key) {
                    existing.dense = Some(rank);
                }
            }
        }
    }
    Ok(out)
}
