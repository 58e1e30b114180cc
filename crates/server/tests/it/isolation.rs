//! 10,000 random operations over 20 namespaces, each namespace with its own key, over real HTTP.
//! Every namespace's texts carry a marker (`nsNN-mark`) and share one vocabulary, so that a
//! retrieval or stats leak across namespaces would show up as a foreign marker in a response.

use std::collections::BTreeMap;

use evicortex_server::ServerConfig;
use proptest::prelude::*;
use serde_json::json;

use crate::harness::{Mode, TestServer, turn};

const NAMESPACES: usize = 20;
const WORDS: &[&str] =
    &["lisbon", "cello", "kyoto", "sourdough", "marathon", "vet", "apartment", "alps"];

#[derive(Debug, Clone)]
enum Op {
    Append {
        ns: usize,
        session: u8,
        turns: u8,
        word: usize,
    },
    Compile {
        ns: usize,
        word: usize,
        budget: u32,
    },
    Stats {
        ns: usize,
    },
    EraseSession {
        ns: usize,
        session: u8,
    },
    /// The key of `ns` used on the path of `target`.
    Trespass {
        ns: usize,
        target: usize,
        route: u8,
    },
}

fn arb_op() -> impl Strategy<Value = Op> {
    let ns = 0..NAMESPACES;
    prop_oneof![
        4 => (ns.clone(), 0..6u8, 1..4u8, 0..WORDS.len()).prop_map(|(ns, session, turns, word)| Op::Append { ns, session, turns, word }),
        3 => (ns.clone(), 0..WORDS.len(), 16..400u32).prop_map(|(ns, word, budget)| Op::Compile { ns, word, budget }),
        1 => ns.clone().prop_map(|ns| Op::Stats { ns }),
        1 => (ns.clone(), 0..6u8).prop_map(|(ns, session)| Op::EraseSession { ns, session }),
        1 => (ns.clone(), ns, 0..4u8).prop_map(|(ns, target, route)| Op::Trespass { ns, target, route }),
    ]
}

fn name(ns: usize) -> String {
    format!("tenant-{ns:02}")
}

fn marker(ns: usize) -> String {
    format!("ns{ns:02}-mark")
}

#[track_caller]
fn assert_no_foreign_marker(own: usize, op: &Op, text: &str) -> Result<(), TestCaseError> {
    for other in (0..NAMESPACES).filter(|&o| o != own) {
        prop_assert!(
            !text.contains(&marker(other)),
            "{op:?} by {} returned text of {}: {text}",
            name(own),
            name(other)
        );
        prop_assert!(
            !text.contains(&name(other)),
            "{op:?} by {} named {}: {text}",
            name(own),
            name(other)
        );
    }
    Ok(())
}

/// 10,000 operations (4 cases of 2,500) with BM25 retrieval: the namespace filters of the ledger
/// reads, the corpus and the lexical index.
#[test]
fn ten_thousand_operations_never_leak_across_namespaces_lexical() {
    check_isolation(Mode::LexicalOnly, 4, 2_500);
}

/// The same with dense retrieval too (every append embedded, every compile embeds its question):
/// 600 operations by default, the full 10,000 when `EVICORTEX_SLOW_TESTS=1`.
#[test]
fn operations_never_leak_across_namespaces_hybrid() {
    if std::env::var_os("EVICORTEX_SLOW_TESTS").is_some_and(|v| v == "1") {
        eprintln!("isolation (hybrid): EVICORTEX_SLOW_TESTS=1, running 10,000 operations");
        check_isolation(Mode::Hybrid, 4, 2_500);
    } else {
        eprintln!("isolation (hybrid): 600 operations; set EVICORTEX_SLOW_TESTS=1 for 10,000");
        check_isolation(Mode::Hybrid, 1, 600);
    }
}

fn check_isolation(mode: Mode, cases: u32, ops_per_case: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let config = ProptestConfig { cases, max_shrink_iters: 16, ..ProptestConfig::default() };
    let total_ops = std::cell::Cell::new(0usize);
    proptest!(config, |(ops in prop::collection::vec(arb_op(), ops_per_case))| {
        total_ops.set(total_ops.get() + ops.len());
        runtime.block_on(async {
            let server = TestServer::start_in_mode(ServerConfig::default(), mode).await;
            let keys: Vec<String> = (0..NAMESPACES).map(|ns| server.key_for(&name(ns))).collect();
            // Next free turn index per (namespace, session); erased sessions get fresh names.
            let mut next_turn: BTreeMap<(usize, u8), u32> = BTreeMap::new();
            let mut generation: BTreeMap<(usize, u8), u32> = BTreeMap::new();
            let mut stored = [0u64; NAMESPACES];
            for (step, op) in ops.iter().enumerate() {
                let (own, reply) = match *op {
                    Op::Append { ns, session, turns, word } => {
                        let generation = generation.get(&(ns, session)).copied().unwrap_or(0);
                        let session_name = format!("s{session}-g{generation}");
                        let start = next_turn.entry((ns, session)).or_insert(0);
                        let body: Vec<_> = (0..turns as u32)
                            .map(|i| {
                                let text = format!("{} step {step}: the secret word is {}", marker(ns), WORDS[(word + i as usize) % WORDS.len()]);
                                turn(&session_name, *start + i, &text)
                            })
                            .collect();
                        *start += turns as u32;
                        let reply = server.post(&format!("/v1/namespaces/{}/turns", name(ns)), &keys[ns], &json!({ "turns": body })).await;
                        prop_assert_eq!(reply.status, 200, "{:?}: {}", op, reply.text);
                        stored[ns] += u64::from(turns);
                        (ns, reply)
                    }
                    Op::Compile { ns, word, budget } => {
                        let query = format!("what is the secret word {} of tenant {}", WORDS[word], (ns + 1) % NAMESPACES);
                        let body = json!({"query": query, "budget": budget, "reader_tokenizer": "o200k_base"});
                        let reply = server.post(&format!("/v1/namespaces/{}/compile", name(ns)), &keys[ns], &body).await;
                        prop_assert_eq!(reply.status, 200, "{:?}: {}", op, reply.text);
                        (ns, reply)
                    }
                    Op::Stats { ns } => {
                        let reply = server.get(&format!("/v1/namespaces/{}/stats", name(ns)), Some(&keys[ns])).await;
                        prop_assert_eq!(reply.status, 200, "{:?}: {}", op, reply.text);
                        prop_assert_eq!(reply.body["turns"].as_u64(), Some(stored[ns]), "{:?}: {}", op, reply.text);
                        (ns, reply)
                    }
                    Op::EraseSession { ns, session } => {
                        let generation = generation.entry((ns, session)).or_insert(0);
                        let session_name = format!("s{session}-g{generation}");
                        let reply = server.post(&format!("/v1/namespaces/{}/erase", name(ns)), &keys[ns], &json!({"session": session_name})).await;
                        let erased = next_turn.remove(&(ns, session)).unwrap_or(0);
                        if erased == 0 {
                            prop_assert_eq!(reply.status, 404, "{:?}: {}", op, reply.text);
                        } else {
                            prop_assert_eq!(reply.status, 200, "{:?}: {}", op, reply.text);
                            prop_assert_eq!(reply.body["erased"].as_array().map(Vec::len), Some(erased as usize));
                            stored[ns] -= u64::from(erased);
                            *generation += 1;
                        }
                        (ns, reply)
                    }
                    Op::Trespass { ns, target, route } => {
                        let path = format!("/v1/namespaces/{}/", name(target));
                        let reply = match route {
                            0 => server.get(&format!("{path}stats"), Some(&keys[ns])).await,
                            1 => server.post(&format!("{path}compile"), &keys[ns], &json!({"query": "secret word", "budget": 200, "reader_tokenizer": "o200k_base"})).await,
                            2 => server.post(&format!("{path}erase"), &keys[ns], &json!({"all": true})).await,
                            _ => server.post(&format!("{path}turns"), &keys[ns], &json!({"turns": [turn("x", 0, &marker(ns))]})).await,
                        };
                        if ns == target {
                            prop_assert!(reply.status < 500, "{:?}: {}", op, reply.text);
                            if route == 2 {
                                // Erasing one's own namespace is allowed: forget it all.
                                next_turn.retain(|(n, _), _| *n != ns);
                                for session in 0..6 {
                                    *generation.entry((ns, session)).or_insert(0) += 1;
                                }
                                stored[ns] = 0;
                            }
                            if route == 3 && reply.status == 200 {
                                stored[ns] += reply.body["appended"].as_u64().unwrap_or(0);
                            }
                        } else {
                            prop_assert_eq!(reply.status, 403, "{:?}: {}", op, reply.text);
                        }
                        (ns, reply)
                    }
                };
                assert_no_foreign_marker(own, op, &reply.text)?;
            }
            server.stop().await;
            Ok(())
        })?;
    });
    eprintln!(
        "isolation ({mode:?}): {} operations over {NAMESPACES} namespaces, no foreign text in any response",
        total_ops.get()
    );
}

/// What `beta` sees of its own work, with what differs by store (digests are salted per
/// record) removed.
async fn beta_session(alpha_turns: u32) -> Vec<serde_json::Value> {
    fn strip_digests(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove("digest");
                map.values_mut().for_each(strip_digests);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip_digests),
            _ => {}
        }
    }
    let server = TestServer::start_in_mode(ServerConfig::default(), Mode::LexicalOnly).await;
    let (alpha, beta) = (server.key_for("alpha"), server.key_for("beta"));
    let alpha_writes = |first: u32| {
        let turns: Vec<_> =
            (first..first + alpha_turns).map(|i| turn("a", i, "alpha's lisbon cello")).collect();
        json!({ "turns": turns })
    };
    let mut seen = Vec::new();
    let mut keep = |reply: crate::harness::Reply| {
        assert_eq!(reply.status, 200, "{}", reply.text);
        let mut body = reply.body;
        strip_digests(&mut body);
        seen.push(if body.is_null() { json!(reply.text) } else { body });
    };
    if alpha_turns > 0 {
        assert_eq!(
            server.post("/v1/namespaces/alpha/turns", &alpha, &alpha_writes(0)).await.status,
            200
        );
    }
    let first = json!({ "turns": [turn("b", 0, "I moved to Lisbon in May."), turn("b", 1, "Lisbon is lovely.")] });
    keep(server.post("/v1/namespaces/beta/turns", &beta, &first).await);
    if alpha_turns > 0 {
        let erase = json!({ "record": 2 });
        assert_eq!(server.post("/v1/namespaces/alpha/erase", &alpha, &erase).await.status, 200);
        let more = alpha_writes(alpha_turns);
        assert_eq!(server.post("/v1/namespaces/alpha/turns", &alpha, &more).await.status, 200);
    }
    let second = json!({ "turns": [turn("b", 2, "I took up the cello."), turn("b", 3, "Cello lessons on Monday.")] });
    keep(server.post("/v1/namespaces/beta/turns", &beta, &second).await);
    keep(server.post("/v1/namespaces/beta/erase", &beta, &json!({ "record": 2 })).await);
    let ask = json!({
        "query": "Where did I move, and what do I play?",
        "budget": 200,
        "reader_tokenizer": "o200k_base"
    });
    keep(server.post("/v1/namespaces/beta/compile", &beta, &ask).await);
    keep(server.get("/v1/namespaces/beta/stats", Some(&beta)).await);
    keep(server.get("/v1/namespaces/beta/export", Some(&beta)).await);
    server.stop().await;
    seen
}

/// S2: every reply beta gets (append receipts, erasure receipts, compiled contexts with their
/// citations and coverage, stats, export) is the same whether or not another tenant wrote
/// hundreds of turns and erased one before and between beta's requests: record ids are
/// numbers within the namespace, not ledger positions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_learns_nothing_of_another_tenants_volume() {
    let alone = beta_session(0).await;
    let beside_alpha = beta_session(300).await;
    assert_eq!(alone.len(), 6);
    assert_eq!(alone, beside_alpha);
    let compiled = &alone[3];
    assert!(compiled["text"].as_str().unwrap().contains("[#1]"), "{compiled}");
    assert_eq!(compiled["coverage"]["corpus_last_record"], json!(4), "{compiled}");
}
