use evicortex_core::EventTime;

use super::*;

fn record(id: u64, session: &str, index: u32, minute: u32, text: &str) -> Evidence {
    let mut e = crate::test_corpus::record(id, session, index, text);
    e.turn.time = EventTime::parse_rfc3339(&format!("2024-05-02T10:{minute:02}:00Z")).unwrap();
    e
}

#[test]
fn sessions_keep_turn_order_and_copies_time_order_whatever_the_arrival_order() {
    let mut corpus = Corpus::new(Namespace::new("n").unwrap(), Vec::new(), []).unwrap();
    // (session, turn index, minute, text): turns and times arrive shuffled.
    let arrivals = [
        ("a", 5, 30, "same"),
        ("a", 1, 50, "one"),
        ("b", 2, 10, "same"),
        ("a", 3, 20, "three"),
        ("a", 0, 40, "same"),
        ("b", 0, 10, "same"),
        ("a", 9, 5, "nine"),
    ];
    for (i, (session, index, minute, text)) in arrivals.iter().enumerate() {
        corpus.push(record(i as u64 + 1, session, *index, *minute, text)).unwrap();
    }
    let turns = |pos: usize| -> Vec<u32> {
        corpus.session_of(pos).iter().map(|&p| corpus.at(p as usize).turn.turn.raw()).collect()
    };
    assert_eq!(turns(0), [0, 1, 3, 5, 9]);
    assert_eq!(turns(2), [0, 2]);
    let copies: Vec<u64> =
        corpus.text_group(0).iter().map(|&p| corpus.at(p as usize).id.raw()).collect();
    // Minutes 10 (ids 3 and 6, by id), 30 (id 1), 40 (id 5).
    assert_eq!(copies, [3, 6, 1, 5]);
}

#[test]
fn the_last_admitted_position_is_the_last_eligible_record_said_by_the_as_of_time() {
    let mut corpus = Corpus::new(Namespace::new("n").unwrap(), Vec::new(), []).unwrap();
    let minutes = [30, 10, 50, 20, 40, 5];
    let as_of = |minute: u32| record(99, "s", 0, minute, "").turn.time.utc_micros();
    for (i, minute) in minutes.iter().enumerate() {
        corpus.push(record(i as u64 + 1, "s", i as u32, *minute, "t")).unwrap();
        for asked in [0, 5, 9, 10, 25, 35, 45, 50, 59] {
            let want = (0..=i).rev().find(|&p| minutes[p] <= asked);
            assert_eq!(corpus.last_admitted_position(as_of(asked)), want, "{i} {asked}");
        }
    }
    let mut other = record(7, "s", 7, 1, "another namespace");
    other.turn.namespace = Namespace::new("m").unwrap();
    corpus.push(other).unwrap();
    corpus.push(record(8, "s", 8, 2, "erased")).unwrap();
    let erased = Corpus::new(
        Namespace::new("n").unwrap(),
        corpus.evidence().to_vec(),
        [TurnId::from_raw(8)],
    )
    .unwrap();
    assert_eq!(
        erased.last_admitted_position(as_of(3)),
        None,
        "ineligible records are not admitted"
    );
    assert_eq!(erased.last_admitted_position(as_of(5)), Some(5));
}

#[test]
fn precounted_texts_are_the_live_ones_counted_as_packing_counts_them() {
    let texts = ["I moved to Lisbon.\nThen Porto.", "Bom dia! \u{1f642}", "", "erased text"];
    let mut evidence: Vec<Evidence> =
        texts.iter().enumerate().map(|(i, t)| record(i as u64 + 1, "s", i as u32, 0, t)).collect();
    let mut other = record(9, "s", 9, 0, "another namespace");
    other.turn.namespace = Namespace::new("m").unwrap();
    evidence.push(other);
    let corpus =
        Corpus::new(Namespace::new("n").unwrap(), evidence, [TurnId::from_raw(4)]).unwrap();
    let reader = crate::TiktokenReader::o200k_base();
    assert_eq!(corpus.precount_text_tokens(&reader, 0..2).unwrap(), 2);
    assert_eq!(corpus.precount_text_tokens(&reader, 0..100).unwrap(), 1, "the third live text");
    assert_eq!(corpus.precount_text_tokens(&reader, 0..100).unwrap(), 0, "all cached");
    assert_eq!(corpus.text_tokens_cached("o200k_base"), 3);
    let caches = corpus.turn_tokens.read().unwrap();
    for (pos, text) in texts[..3].iter().enumerate() {
        let counted = caches["o200k_base"][pos].unwrap();
        assert_eq!(counted.text as usize, reader.count(text).unwrap());
        let e = corpus.at(pos);
        for layout in Layout::ALL {
            let header = layout_header(layout, e.turn.session.as_str(), e.turn.time);
            assert_eq!(counted.header[layout.index()] as usize, reader.count(&header).unwrap());
            let at = expected_header_time(&corpus, pos);
            let prefix = layout_prefix(layout, &RenderTurn::whole(e, &[]), at);
            assert_eq!(counted.prefix[layout.index()] as usize, reader.count(&prefix).unwrap());
        }
    }
}

#[test]
fn an_erasure_carries_the_line_counts_of_the_records_left_and_none_of_the_erased() {
    let texts = ["I moved to Lisbon.", "the secret plan", "Then Porto.", "the secret plan"];
    let evidence: Vec<Evidence> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| record(i as u64 + 1, "s", i as u32, i as u32, t))
        .collect();
    let corpus = Corpus::new(Namespace::new("n").unwrap(), evidence, []).unwrap();
    let reader = crate::TiktokenReader::o200k_base();
    corpus.precount_text_tokens(&reader, 0..4).unwrap();
    let digests = |corpus: &Corpus, pos: usize| -> Vec<([u8; 32], String)> {
        let rendered = corpus.rendered_lines(pos);
        let pieces = lines_with_digests(rendered.iter().map(String::as_str));
        pieces.into_iter().map(|(d, line)| (d, line.to_owned())).collect()
    };
    let gone: Vec<_> = [1, 3].iter().flat_map(|&pos| digests(&corpus, pos)).collect();

    let after = corpus.without(&HashSet::from([TurnId::from_raw(2)]));
    let cached = after.line_tokens.read().unwrap()["o200k_base"].clone();
    for (digest, line) in &gone {
        assert!(!cached.contains_key(digest), "a line of the erased turn or citing it: {line:?}");
    }
    for (pos, text) in [(0, texts[0]), (1, texts[2])] {
        let lines = digests(&after, pos);
        let own: Vec<_> = lines.iter().filter(|(_, line)| line.contains(text)).collect();
        assert_eq!(own.len(), 2 * Layout::ALL.len(), "followed by a turn, by a header");
        for (digest, line) in own {
            assert_eq!(cached.get(digest).copied(), Some(reader.count(line).unwrap() as u32));
        }
    }

    // A cache swollen beyond what its records render starts over.
    let swollen: LineCounts = (0..=LINES_KEPT_PER_RECORD * 3).map(|i| ([i as u8; 32], 1)).collect();
    after.add_counts("o200k_base", [], swollen);
    let again = after.without(&HashSet::from([TurnId::from_raw(3)]));
    assert_eq!(again.line_tokens_cached("o200k_base"), 0);
}
