//! Two servers of one PostgreSQL store (two `Memory` handles, each with a derived directory of
//! its own) share the embedding cache in the database: the second embeds nothing the first
//! embedded, an erasure through either removes the erased texts' vectors from the database's
//! table, and a catch-up racing an erasure through the other never leaves one behind.

use evicortex::{
    CatchUpLimits, CompileConfig, DenseConfig, EraseTarget, EventTime, Memory, Namespace, Role,
    SessionId, TextDigest, Turn, TurnIndex,
};

use crate::{
    incremental_indexes::compile_alice, postgres_vectors::open as server, test_store::TestDb,
};

fn turn(session: &str, index: u32, text: &str) -> Turn {
    Turn {
        namespace: Namespace::new("alice").unwrap(),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: Role::User,
        speaker: None,
        text: text.to_owned(),
        time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
        meta: serde_json::Map::new(),
    }
}

/// The vector rows of `text` (a turn without a speaker: its document is its text) in the
/// database's cache.
fn rows_of(db: &TestDb, text: &str) -> i64 {
    let mut client = postgres::Client::connect(&db.url, postgres::NoTls).unwrap();
    let digest = TextDigest::of(text);
    client
        .query_one(
            "SELECT count(*) FROM embedding_vectors WHERE text_digest = $1",
            &[&digest.as_bytes().as_slice()],
        )
        .unwrap()
        .get(0)
}

fn catch_up(memory: &Memory) -> evicortex::EmbedReport {
    memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap()
}

const TEXTS: [&str; 4] = [
    "I swam across Lake Tahoe last summer.",
    "My cello lessons start on Tuesday.",
    "The marathon is in May next year.",
    "Our vault code is 4711, keep it secret.",
];

#[test]
fn a_second_server_embeds_nothing_the_first_embedded() {
    let db = TestDb::new();
    let (one_dir, two_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let one = server(&db, &one_dir);
    let turns: Vec<Turn> = TEXTS.iter().enumerate().map(|(i, t)| turn("s1", i as u32, t)).collect();
    one.append(&turns).unwrap();
    assert_eq!(catch_up(&one).embedded_texts, TEXTS.len() as u64);

    let two = server(&db, &two_dir);
    let report = catch_up(&two);
    assert_eq!(report.embedded_texts, 0, "the second server embedded again: {report:?}");
    assert_eq!(report.already_cached, TEXTS.len() as u64);
    assert!(!two_dir.path().join("embeddings.sqlite").exists(), "no local cache file");

    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let context = compile_alice(&two, "When does the cello start?", &config, 400).unwrap();
    let dense: Vec<_> = context.items.iter().filter(|item| item.dense.is_some()).collect();
    assert_eq!(dense.len(), TEXTS.len(), "every turn's vector is found: {:?}", context.items);
}

#[test]
fn an_erasure_through_one_server_removes_the_vectors_for_every_server() {
    let db = TestDb::new();
    let (one_dir, two_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (one, two) = (server(&db, &one_dir), server(&db, &two_dir));
    let mut turns: Vec<Turn> =
        TEXTS[..3].iter().enumerate().map(|(i, t)| turn("s1", i as u32, t)).collect();
    turns.push(turn("secret", 0, TEXTS[3]));
    one.append(&turns).unwrap();
    catch_up(&one);
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: 10 });
    let question = "What is the vault code?";
    let before = compile_alice(&two, question, &config, 400).unwrap();
    assert!(before.items.iter().any(|item| item.text.contains("4711")), "{:?}", before.items);
    assert_eq!(rows_of(&db, TEXTS[3]), 1);

    let erase =
        EraseTarget::Session(Namespace::new("alice").unwrap(), SessionId::new("secret").unwrap());
    one.erase(&erase).unwrap();
    assert_eq!(rows_of(&db, TEXTS[3]), 0, "the erased text's vector is still in the database");
    assert_eq!(rows_of(&db, TEXTS[0]), 1, "a kept text's vector went too");

    let after = compile_alice(&two, question, &config, 400).unwrap();
    let erased = before.items.iter().find(|item| item.text.contains("4711")).unwrap().record;
    assert!(
        !after.text.contains("4711")
            && after.items.iter().all(|item| item.record != erased)
            && after.excluded.iter().all(|item| item.record != erased),
        "the other server still cites the erased turn: {:?}",
        after.items
    );
    let report = catch_up(&two);
    assert_eq!(report.embedded_texts, 0, "{report:?}");
}

/// A server catching up while another erases: whichever order the cache's write and the
/// erasure's purge take, no vector of an erased text is left in the database. Erase at a
/// different point of the catch-up each round.
#[test]
fn catch_up_racing_an_erasure_through_another_server_leaves_no_vector_of_it() {
    let db = TestDb::new();
    let (one_dir, two_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (one, two) = (server(&db, &one_dir), server(&db, &two_dir));
    let rounds = 8;
    let mut erased_mid_catch_up = 0;
    for round in 0..rounds {
        let secret = |i: u32| format!("round {round} secret number {i} about the red door");
        let kept = |i: u32| format!("round {round} kept number {i} about the garden");
        let session = format!("secret{round}");
        let mut turns = Vec::new();
        for i in 0..16 {
            turns.push(turn(&session, i, &secret(i)));
            turns.push(turn(&format!("kept{round}"), i, &kept(i)));
        }
        one.append(&turns).unwrap();
        let catching_up = {
            let two = two.clone();
            std::thread::spawn(move || {
                two.catch_up(None, CatchUpLimits { chunk_texts: 2 }, &mut |_| {}).unwrap()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20 * round as u64));
        let target = EraseTarget::Session(
            Namespace::new("alice").unwrap(),
            SessionId::new(&session).unwrap(),
        );
        one.erase(&target).unwrap();
        if !catching_up.is_finished() {
            erased_mid_catch_up += 1;
        }
        catching_up.join().unwrap();
        for i in 0..16 {
            assert_eq!(rows_of(&db, &secret(i)), 0, "round {round}: erased text {i} kept a vector");
        }
        catch_up(&two);
        for i in 0..16 {
            assert_eq!(rows_of(&db, &kept(i)), 1, "round {round}: kept text {i} is embedded");
        }
    }
    assert!(
        erased_mid_catch_up >= 2,
        "only {erased_mid_catch_up} of {rounds} erasures landed during a catch-up: the test does \
         not exercise the race"
    );
}
