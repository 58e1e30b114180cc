use std::collections::HashMap;

use evicortex_core::{Evidence, Namespace};

use super::*;
use crate::test_corpus::record;

fn turn(id: u64, session: &str, index: u32, speaker: &str, text: &str) -> Evidence {
    let mut e = record(id, session, index, text);
    e.turn.speaker = Some(speaker.to_owned());
    e
}

fn corpus() -> Corpus {
    let ns = Namespace::new("n").unwrap();
    Corpus::new(
        ns,
        vec![
            turn(1, "a", 0, "Ann", "Which lake did you swim in?"),
            turn(2, "a", 1, "Bo", "Lake Tahoe."),
            turn(3, "a", 2, "Ann", "Nice!"),
            turn(4, "b", 0, "Bo", "New session."),
            turn(5, "a", 3, "Bo", "Erased later."),
        ],
        [TurnId::from_raw(5)],
    )
    .unwrap()
}

#[test]
fn windows_stay_in_the_session_and_skip_ineligible_records() {
    let c = corpus();
    assert_eq!(
        window_document(&c, 1, 1),
        "Ann: Which lake did you swim in?\nBo: Lake Tahoe.\nAnn: Nice!"
    );
    assert_eq!(window_document(&c, 2, 1), "Bo: Lake Tahoe.\nAnn: Nice!", "5 is erased");
    assert_eq!(window_document(&c, 3, 2), "Bo: New session.");
    assert_eq!(window_document(&c, 4, 1), "", "an erased record has no window");
    let index =
        WindowIndex::build(&c, 1, Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::Plain).unwrap();
    assert_eq!(index.index().len(), 4);
    let hits = index.index().search(&index.index().analyze("swim"), 10, |_| true);
    let mut keys: Vec<u64> = hits.iter().map(|h| h.key.raw()).collect();
    keys.sort_unstable();
    assert_eq!(keys, [1, 2], "the answer turn is found through its question");
}

#[test]
fn a_window_is_admitted_when_every_record_of_it_is() {
    // Sessions of turns said at shuffled minutes, one record erased, one of another namespace.
    let mut evidence: Vec<Evidence> = (0..40u64)
        .map(|i| {
            let mut e = record(i + 1, ["a", "b", "c"][(i % 3) as usize], (i * 7 % 40) as u32, "t");
            let minute = i * 17 % 60;
            e.turn.time =
                evicortex_core::EventTime::parse_rfc3339(&format!("2024-05-02T10:{minute:02}:00Z"))
                    .unwrap();
            e
        })
        .collect();
    evidence[11].turn.namespace = Namespace::new("m").unwrap();
    let c = Corpus::new(Namespace::new("n").unwrap(), evidence, [TurnId::from_raw(8)]).unwrap();
    for minute in [None, Some(0), Some(20), Some(45), Some(59)] {
        let as_of = minute.map(|m| {
            evicortex_core::EventTime::parse_rfc3339(&format!("2024-05-02T10:{m:02}:00Z"))
                .unwrap()
                .utc_micros()
        });
        let admission = Admission::new(&c, as_of);
        for radius in 0..4 {
            for pos in 0..c.len() {
                let every =
                    window_positions(&c, pos, radius).iter().all(|&p| admission.admits(c.at(p).id));
                assert_eq!(window_admitted(&c, pos, radius, &admission), every, "{pos} {radius}");
            }
        }
    }
}

/// Records pushed in ledger order but not in turn order, across sessions, one erased.
fn growing() -> (Corpus, Vec<Evidence>) {
    let records = [
        (1, "a", 0, "Which lake did you swim in?"),
        (2, "a", 2, "It was cold."),
        (3, "b", 0, "Lake Tahoe is deep."),
        (4, "a", 1, "Lake Tahoe, in June."),
        (5, "a", 5, "We swim again next year."),
        (6, "b", 1, "Deep and cold."),
        (7, "a", 3, "Erased."),
        (8, "c", 0, "A new topic: cello."),
        (9, "a", 4, "The cello can wait."),
        (10, "a", 6, "Swim, cello, lake."),
    ];
    let mut all: Vec<Evidence> = records
        .iter()
        .map(|&(id, session, index, text)| turn(id, session, index, "Ann", text))
        .collect();
    let rest = all.split_off(3);
    let ns = Namespace::new("n").unwrap();
    (Corpus::new(ns, all, [TurnId::from_raw(7)]).unwrap(), rest)
}

fn vector_of(id: TurnId) -> Vec<f32> {
    let x = id.raw() as f32;
    vec![x.sin(), x.cos(), (x * 0.5).sin()]
}

#[test]
fn extending_a_window_index_searches_like_building_it_again() {
    let params = Bm25Params { k1: 1.2, b: 0.75 };
    // Both analyzers: build and extension index windows from their turns' terms, and the
    // extension replaces the windows new turns entered.
    let settings = [1, 2].into_iter().flat_map(|r| {
        [Analyzer::Plain, Analyzer::EnglishSnowball].map(move |analyzer| (r, analyzer))
    });
    for (radius, analyzer) in settings {
        let (mut corpus, rest) = growing();
        let mut extended = WindowIndex::build(&corpus, radius, params, analyzer).unwrap();
        for e in rest {
            corpus.push(e).unwrap();
            extended.extend(&corpus).unwrap();
            let built = WindowIndex::build(&corpus, radius, params, analyzer).unwrap();
            assert_eq!(extended.built_for(), built.built_for());
            assert_eq!(extended.index().len(), built.index().len());
            assert_eq!(extended.index().covers(), built.index().covers());
            for query in ["swim", "lake tahoe", "cold deep", "cello", "erased", "june wait"] {
                let terms = built.index().analyze(query);
                assert_eq!(
                    extended.index().search(&terms, 20, |_| true),
                    built.index().search(&terms, 20, |_| true),
                    "radius {radius}, {} records, {query:?}",
                    corpus.len()
                );
            }
        }
    }
}

#[test]
fn erasing_from_the_context_indexes_searches_like_building_them_without() {
    let params = Bm25Params { k1: 1.2, b: 0.75 };
    let (mut full, rest) = growing();
    for e in rest {
        full.push(e).unwrap();
    }
    let ids: Vec<TurnId> = full.evidence().iter().map(|e| e.id).collect();
    // Every set of one or two records, and a whole session.
    let mut sets: Vec<Vec<TurnId>> = ids.iter().map(|&id| vec![id]).collect();
    sets.extend(
        ids.iter().flat_map(|&a| ids.iter().filter(move |&&b| b > a).map(move |&b| vec![a, b])),
    );
    sets.push(
        full.evidence().iter().filter(|e| e.turn.session.as_str() == "a").map(|e| e.id).collect(),
    );
    let vectors: HashMap<TurnId, Vec<f32>> =
        ids.iter().filter(|id| id.raw() % 3 != 0).map(|&id| (id, vector_of(id))).collect();
    let vector = |id| vectors.get(&id).map(Vec::as_slice);
    for (set, radius) in sets.iter().flat_map(|s| [1, 2].map(move |r| (s, r))) {
        let erased: HashSet<TurnId> = set.iter().copied().collect();
        let after = full.without(&erased);
        let analyzer = Analyzer::EnglishSnowball;
        let mut windows = WindowIndex::build(&full, radius, params, analyzer).unwrap();
        assert!(windows.erase(&full, &after, &erased).unwrap());
        let built = WindowIndex::build(&after, radius, params, analyzer).unwrap();
        assert_eq!(windows.built_for(), built.built_for());
        assert_eq!(windows.index().len(), built.index().len());
        for query in ["swim", "lake tahoe", "cold deep", "cello", "erased", "june wait next"] {
            let terms = built.index().analyze(query);
            assert_eq!(
                windows.index().search(&terms, 20, |_| true),
                built.index().search(&terms, 20, |_| true),
                "{set:?} radius {radius} {query:?}"
            );
            for term in &terms {
                assert_eq!(windows.index().doc_freq(term), built.index().doc_freq(term));
            }
        }
        let seen = vectors.len();
        let mut context = ContextVectors::build(&full, radius, 3, seen, vector);
        assert!(context.erase(&full, &after, &erased, seen, |id| vector(id).map(Cow::Borrowed)));
        let built = ContextVectors::build(&after, radius, 3, seen, vector);
        for query in [[1.0, 0.0, 0.0], [0.2, -0.7, 0.1], [0.0, 0.0, 1.0]] {
            assert_eq!(
                context.search(&query, 20, |_| true).unwrap(),
                built.search(&query, 20, |_| true).unwrap(),
                "{set:?} radius {radius}"
            );
        }
        assert_eq!(context.heap_bytes(), built.heap_bytes());
    }
    // Built for fewer records than the corpus: nothing changes, the caller builds again.
    let (short, _) = growing();
    let mut stale = WindowIndex::build(&short, 1, params, Analyzer::Plain).unwrap();
    let erased = HashSet::from([ids[0]]);
    assert!(!stale.erase(&full, &full.without(&erased), &erased).unwrap());
    assert_eq!(stale.built_for(), short.len());
}

#[test]
fn updating_context_vectors_searches_like_building_them_again() {
    let (mut corpus, rest) = growing();
    // Turns get their vectors late: even ids only once the corpus has grown past them.
    let mut embedded: Vec<TurnId> =
        corpus.evidence().iter().map(|e| e.id).filter(|id| id.raw() % 2 == 1).collect();
    let vectors = |embedded: &[TurnId]| -> HashMap<TurnId, Vec<f32>> {
        embedded.iter().map(|&id| (id, vector_of(id))).collect()
    };
    let now = vectors(&embedded);
    let mut updated =
        ContextVectors::build(&corpus, 2, 3, now.len(), |id| now.get(&id).map(Vec::as_slice));
    for e in rest {
        let new_pos = corpus.len();
        let late: Vec<TurnId> = embedded.iter().map(|id| TurnId::from_raw(id.raw() + 1)).collect();
        corpus.push(e).unwrap();
        let mut changed = Vec::new();
        for id in late.into_iter().chain([corpus.evidence()[new_pos].id]) {
            if !embedded.contains(&id) && corpus.position(id).is_some() {
                embedded.push(id);
                changed.push(id);
            }
        }
        let now = vectors(&embedded);
        updated
            .update(&corpus, changed, now.len(), |id| now.get(&id).map(|v| Cow::Owned(v.clone())));
        let built =
            ContextVectors::build(&corpus, 2, 3, now.len(), |id| now.get(&id).map(Vec::as_slice));
        for query in [[1.0, 0.0, 0.0], [0.2, -0.7, 0.1], [0.0, 0.0, 1.0]] {
            assert_eq!(
                updated.search(&query, 20, |_| true).unwrap(),
                built.search(&query, 20, |_| true).unwrap()
            );
        }
        assert_eq!(updated.heap_bytes(), built.heap_bytes());
    }
}

/// Radius-1 context vectors of [`corpus`] from five two-dimensional turn vectors.
fn small_context_vectors(c: &Corpus) -> ContextVectors {
    let vectors = [[1.0f32, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]];
    ContextVectors::build(c, 1, 2, 5, |id| vectors.get(id.raw() as usize - 1).map(|v| v.as_slice()))
}

#[test]
fn context_vectors_sum_the_window_and_rank_by_cosine() {
    let c = corpus();
    let cv = small_context_vectors(&c);
    // Turn 1: (1,0)+(0,1) normalised; turn 2: (1,0)+(0,1)+(0,1); turn 3: (0,2).
    let hits = cv.search(&[0.0, 1.0], 10, |_| true).unwrap();
    let keys: Vec<u64> = hits.iter().map(|h| h.key.raw()).collect();
    assert_eq!(keys, [3, 2, 1, 4]);
    assert!((hits[0].score - 1.0).abs() < 1e-6);
    assert!((hits[1].score - 2.0 / 5.0f32.sqrt()).abs() < 1e-6);
    let admitted = cv.search(&[0.0, 1.0], 1, |id| id.raw() != 3).unwrap();
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0].key.raw(), 2);
}

#[test]
fn a_seeded_search_scores_the_windows_around_its_seeds() {
    let c = corpus();
    let cv = small_context_vectors(&c);
    let query = [0.0, 1.0];
    let every: Vec<TurnId> = c.evidence().iter().map(|e| e.id).collect();
    assert_eq!(
        cv.search_seeded(&c, &query, 10, every.iter().copied(), |_| true).unwrap(),
        cv.search(&query, 10, |_| true).unwrap(),
        "seeded with every record, it is the full search"
    );
    // Seeded with turn 1 alone: the windows holding it are those of turns 1 and 2.
    let hits = cv.search_seeded(&c, &query, 10, [TurnId::from_raw(1)], |_| true).unwrap();
    let keys: Vec<u64> = hits.iter().map(|h| h.key.raw()).collect();
    assert_eq!(keys, [2, 1]);
    assert_eq!(hits, cv.search(&query, 10, |id| id.raw() <= 2).unwrap());
    let admitted =
        cv.search_seeded(&c, &query, 10, [TurnId::from_raw(1)], |id| id.raw() != 2).unwrap();
    assert_eq!(admitted.iter().map(|h| h.key.raw()).collect::<Vec<_>>(), [1]);
    assert_eq!(cv.search_seeded(&c, &query, 10, [TurnId::from_raw(99)], |_| true).unwrap(), []);
}
