use std::sync::Arc;

use evicortex::{IngestOptions, Namespace, parse_jsonl};

use crate::test_store::TestStore;

#[test]
fn one_memory_serves_many_threads() {
    let store = TestStore::new();
    let memory = Arc::new(store.open());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let memory = Arc::clone(&memory);
            std::thread::spawn(move || {
                for i in 0..10 {
                    let line = format!(
                        r#"{{"namespace":"n{t}","session":"s","turn":{i},"role":"user","text":"t{t} i{i}","time":"2024-01-01T00:00:00Z"}}"#
                    );
                    let turns = parse_jsonl("thread", line.as_bytes(), &IngestOptions::default()).unwrap();
                    memory.append(&turns).unwrap();
                    let seen = memory.evidence(&Namespace::new(&format!("n{t}")).unwrap()).unwrap();
                    assert_eq!(seen.len(), i + 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(memory.stats().unwrap().ledger.turns, 40);
    assert_eq!(memory.namespaces().unwrap().len(), 4);
    memory.verify().unwrap();
}

/// Group commit: appends that many threads make at the same moment are all stored, each
/// acknowledged with its own ids, and share ledger transactions.
#[test]
fn concurrent_appends_are_all_stored_and_grouped() {
    const THREADS: usize = 32;
    const PER_THREAD: usize = 8;
    let store = TestStore::new();
    let memory = store.open();
    let start = Arc::new(std::sync::Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (memory, start) = (memory.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                (0..PER_THREAD)
                    .map(|i| {
                        let line = format!(
                            r#"{{"namespace":"load","session":"t{t}","turn":{i},"role":"user","text":"thread {t} turn {i}","time":"2024-01-01T00:00:00Z"}}"#
                        );
                        let turns =
                            parse_jsonl("thread", line.as_bytes(), &IngestOptions::default())
                                .unwrap();
                        let receipt = memory.append(&turns).unwrap();
                        assert_eq!(receipt.appended(), 1);
                        receipt.outcomes[0].id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    ids.sort();
    ids.dedup();
    let total = THREADS * PER_THREAD;
    assert_eq!(ids.len(), total, "every acknowledged append has an id of its own");
    assert_eq!(memory.stats().unwrap().ledger.turns, total as u64);
    assert_eq!(memory.evidence(&Namespace::new("load").unwrap()).unwrap().len(), total);
    let stats = memory.group_commit_stats();
    assert_eq!(stats.batches, total as u64);
    assert!(
        stats.transactions < stats.batches,
        "concurrent appends must share transactions: {stats:?}"
    );
    memory.verify().unwrap();
}
