use evicortex_ledger::EvidenceLedger;
use std::sync::Arc;

use evicortex_core::Namespace;

use crate::fixture::{Store, turn};

#[test]
fn writers_and_readers_share_one_ledger() {
    let store = Store::new();
    let ledger = Arc::new(store.ledger);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let ledger = Arc::clone(&ledger);
            std::thread::spawn(move || {
                for b in 0..10u32 {
                    let batch: Vec<_> =
                        (0..5).map(|i| turn("ns", &format!("w{w}"), b * 5 + i, "text")).collect();
                    ledger.append(&batch).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let ledger = Arc::clone(&ledger);
            std::thread::spawn(move || {
                let ns = Namespace::new("ns").unwrap();
                for _ in 0..20 {
                    let n = ledger.evidence(&ns).unwrap().len();
                    assert_eq!(n % 5, 0, "a reader saw a partial batch: {n} turns");
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    let report = ledger.verify().unwrap();
    assert_eq!(report.turns, 200);
}
