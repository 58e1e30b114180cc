//! Writers on separate connections keep one chain.

use std::sync::Barrier;

use evicortex_ledger::{AppendStatus, EvidenceLedger};

use crate::support::{TestDb, ns, turn};

#[test]
fn concurrent_appends_from_two_connections_keep_one_valid_chain() {
    let db = TestDb::new();
    let writers = [db.ledger(), db.ledger()];
    let shared: Vec<_> = (0..5).map(|i| turn("shared", "race", i, "both try this")).collect();
    let barrier = Barrier::new(writers.len());
    let shared_appended: usize = std::thread::scope(|s| {
        let handles: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, pg)| {
                let (barrier, shared) = (&barrier, &shared);
                s.spawn(move || {
                    barrier.wait();
                    let mut appended_shared = 0;
                    for batch in 0..15u32 {
                        let turns: Vec<_> = (0..4)
                            .map(|i| {
                                let namespace = if i % 2 == 0 { "alice" } else { "bob" };
                                turn(namespace, &format!("w{w}-b{batch}"), i, "concurrent")
                            })
                            .collect();
                        let receipt = pg.append(&turns).unwrap();
                        assert_eq!(receipt.appended(), 4);
                        if batch == 7 {
                            appended_shared += pg.append(shared).unwrap().appended();
                        }
                    }
                    appended_shared
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(shared_appended, 5, "the shared batch is stored once, by whichever came first");
    let report = writers[0].verify().unwrap();
    assert_eq!(report.records, 2 * 15 * 4 + 5);
    assert_eq!(writers[1].verify().unwrap(), report);
    let alice = writers[1].evidence(&ns("alice")).unwrap();
    let numbers: Vec<u64> = alice.iter().map(|e| e.id.raw()).collect();
    assert_eq!(numbers, (1..=60).collect::<Vec<_>>(), "numbers without gaps or repeats");
    let again = writers[0].append(&shared).unwrap();
    assert!(again.outcomes.iter().all(|o| o.status == AppendStatus::AlreadyPresent));
}
