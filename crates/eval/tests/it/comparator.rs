use std::sync::Arc;

use evicortex::{EmbeddingRole, Encoder, Namespace, Role};
use evicortex_eval::{
    comparator::hybrid_chunk_rag::{ChunkRagConfig, chunk_sessions},
    eval_question::{EvalQuestion, EvalTurn},
    protocol::EvidenceKeys,
    ranking::TurnRef,
};

/// The evaluation's encoder; fails (never skips) when it is not installed.
fn encoder() -> Arc<dyn Encoder> {
    evicortex_eval::runner::eval_encoder().unwrap_or_else(|e| {
        panic!("the pinned encoder is required: run `evicortex model fetch` ({e:#})")
    })
}

/// A synthetic question (not benchmark data): two sessions, one with a turn far longer than a
/// chunk window.
fn synthetic_question() -> EvalQuestion {
    let day =
        |d: u32| chrono::NaiveDate::from_ymd_opt(2023, 5, d).unwrap().and_hms_opt(9, 0, 0).unwrap();
    let long = "The quarterly report covers revenue, churn and the Lisbon office move. ".repeat(60);
    let texts = [
        (0, 0, Role::User, "I moved to Lisbon in May.".to_owned()),
        (0, 1, Role::Assistant, long),
        (0, 2, Role::User, "Thanks, that helps.".to_owned()),
        (1, 0, Role::User, "My sister visits in June.".to_owned()),
    ];
    let turns = texts
        .into_iter()
        .map(|(s, t, role, text)| EvalTurn {
            at: TurnRef { session: s, turn: t },
            session: format!("s{s}"),
            role,
            speaker: None,
            text,
            time: day(2 + s as u32),
        })
        .collect();
    EvalQuestion {
        id: "synthetic".into(),
        namespace: Namespace::new("synthetic").unwrap(),
        query: "where did I move?".into(),
        as_of: None,
        kind: "single-session-user".into(),
        abstention: false,
        turns,
        keys: EvidenceKeys {
            session_keys: vec![],
            turn_keys: vec![],
            gold_sessions: Default::default(),
            gold_turns: Default::default(),
            evidence_turns: Default::default(),
            relevant_user_turns: 0,
            relevant_sessions: 0,
            widened_relevant_user_turns: 0,
            widened_relevant_all_turns: 0,
            exclusion: None,
        },
        gold: Default::default(),
    }
}

/// Every chunk fits the encoder's window whole, carries its session metadata, maps back to the
/// turns it holds, and together the chunks cover every turn; consecutive chunks overlap.
#[test]
fn chunks_fit_the_encoder_and_map_back_to_turns() {
    let encoder = encoder();
    let q = synthetic_question();
    let config = ChunkRagConfig::preregistered(50);
    let chunks = chunk_sessions(&q, &config, encoder.as_ref(), &mut Default::default()).unwrap();
    assert!(chunks.len() >= 4, "the long turn spans several windows: {}", chunks.len());
    for c in &chunks {
        let n = encoder.count_tokens(EmbeddingRole::Document, &c.text).unwrap();
        assert_eq!(n, c.encoder_tokens);
        assert!(n <= config.window_tokens, "chunk of {n} tokens");
        assert!(c.text.starts_with(&format!("Session {} (", c.session)), "{}", c.text);
        // What the reader sees of each turn is the chunk's words of that turn.
        assert_eq!(c.parts.len(), c.turns.len());
        let body_words: Vec<&str> =
            c.body.split_whitespace().filter(|w| !w.ends_with(':')).collect();
        let part_words: Vec<&str> = c.parts.iter().flat_map(|p| p.split_whitespace()).collect();
        assert_eq!(part_words, body_words, "{}", c.body);
    }
    let mut covered: Vec<TurnRef> = chunks.iter().flat_map(|c| c.turns.clone()).collect();
    covered.sort();
    covered.dedup();
    assert_eq!(covered.len(), 4);
    assert!(
        chunks
            .iter()
            .all(|c| c.turns.iter().all(|t| t.session == if c.session == "s0" { 0 } else { 1 }))
    );
    // Windows of the long turn overlap: the last words of one chunk start the next.
    let long: Vec<&str> =
        chunks.iter().filter(|c| c.session == "s0").map(|c| c.body.as_str()).collect();
    let tail: Vec<&str> = long[0].split_whitespace().rev().take(3).collect();
    assert!(
        tail.iter().all(|w| long[1].contains(w)),
        "no overlap between {:?} and {:?}",
        long[0],
        long[1]
    );
}

/// A whitespace-free "word" longer than a whole window (as in pasted code or markup in
/// LongMemEval S) is cut into pieces: chunking succeeds, every chunk fits, the turn is covered.
#[test]
fn a_word_longer_than_the_window_is_cut_into_pieces() {
    let encoder = encoder();
    let mut q = synthetic_question();
    // WordPiece makes every punctuation mark a token (and a plain run over 100 characters one
    // [UNK]), so a run like this is hundreds of tokens with no whitespace.
    let blob: String = (0..300).map(|i| format!("a{}-", i % 10)).collect();
    q.turns[1].text = format!("here it is: {blob} done");
    let config = ChunkRagConfig::preregistered(50);
    let chunks = chunk_sessions(&q, &config, encoder.as_ref(), &mut Default::default()).unwrap();
    let holding: Vec<_> = chunks.iter().filter(|c| c.turns.contains(&q.turns[1].at)).collect();
    assert!(holding.len() >= 3, "the blob spans several windows: {}", holding.len());
    for c in &chunks {
        assert!(c.encoder_tokens <= config.window_tokens, "chunk of {} tokens", c.encoder_tokens);
    }
    let joined: String = holding.iter().map(|c| c.body.replace(char::is_whitespace, "")).collect();
    assert!(
        joined.contains(&blob[..200]) && joined.contains(&blob[blob.len() - 200..]),
        "{joined}"
    );
}

/// The comparator retrieves over every field of the product's turn document: for a LoCoMo turn
/// (speaker name, shared image's caption, read by the real adapter), an assistant chat turn
/// without a name (labelled by its role) and a named turn as JSONL gives it, every word of
/// `turn_document` is in the text of the chunks holding the turn.
#[test]
fn chunk_text_carries_every_field_of_the_turn_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locomo.json");
    fs_err::write(
        &path,
        serde_json::json!([{
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Caroline", "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Caroline", "dia_id": "D1:1", "text": "Look at this!",
                     "blip_caption": "a photo of a rainbow flag at a parade"},
                    {"speaker": "Melanie", "dia_id": "D1:2", "text": "Lovely colours."}
                ]
            },
            "qa": [{"question": "What did Caroline share?", "answer": "a flag",
                    "evidence": ["D1:1"], "category": 4}]
        }])
        .to_string(),
    )
    .unwrap();
    let dataset = evicortex_eval::datasets::locomo::LocomoDataset::read(&path).unwrap();
    let mut q = EvalQuestion::from_locomo(&dataset.conversations[0]).remove(0);
    let mut chat = synthetic_question().turns;
    chat.truncate(1);
    chat[0].role = Role::Assistant;
    chat.push(EvalTurn { speaker: Some("Ada Lovelace".into()), ..chat[0].clone() });
    for (i, t) in chat.iter_mut().enumerate() {
        t.at = TurnRef { session: 1, turn: i };
        t.session = "chat".into();
    }
    q.turns.extend(chat);
    let encoder = encoder();
    let config = ChunkRagConfig::preregistered(50);
    let chunks = chunk_sessions(&q, &config, encoder.as_ref(), &mut Default::default()).unwrap();
    for t in &q.turns {
        let document =
            evicortex::front_end::turn_document(&t.stored(&q.namespace).unwrap()).into_owned();
        let text: Vec<&str> = chunks
            .iter()
            .filter(|c| c.turns.contains(&t.at))
            .flat_map(|c| c.text.split_whitespace())
            .collect();
        for word in document.split_whitespace() {
            assert!(text.contains(&word), "{word:?} of {document:?} is not in {text:?}");
        }
        if t.speaker.is_none() {
            assert!(text.contains(&"assistant:"), "{text:?}");
        }
    }
    assert!(q.turns[0].text.contains("rainbow flag"), "the caption is part of the stored turn");
    assert_eq!(config.analyzer, evicortex::CompileConfig::default_for(true).lexical.analyzer);
}
