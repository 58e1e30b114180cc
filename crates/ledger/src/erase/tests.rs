use std::collections::HashSet;

use evicortex_core::{EventTime, Role, Turn, TurnIndex};

use super::*;
use crate::EvidenceLedger;

#[test]
fn erasures_waiting_together_share_a_scrub_and_leave_no_text_behind() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let ns = Namespace::new("alice").unwrap();
    let turns: Vec<Turn> = (0..40)
        .map(|i| Turn {
            namespace: ns.clone(),
            session: SessionId::new(&format!("s{}", i % 4)).unwrap(),
            turn: TurnIndex::new(i),
            role: Role::User,
            speaker: None,
            text: format!("SECRET-{i:02} ").repeat(40),
            time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
            meta: serde_json::Map::new(),
        })
        .collect();
    ledger.append(&turns).unwrap();
    // Each round, all eight commit before any asks for its scrub (what `erase` does in turn),
    // so that the sharing does not depend on how the threads happen to be scheduled.
    let committed = std::sync::Barrier::new(8);
    std::thread::scope(|scope| {
        for thread in 0..8u64 {
            let (ledger, ns, committed) = (&ledger, &ns, &committed);
            scope.spawn(move || {
                for k in 0..5 {
                    let record = TurnId::from_raw(thread * 5 + k + 1);
                    let receipt = ledger.erase_unscrubbed(&EraseTarget::Record(ns.clone(), record));
                    assert_eq!(receipt.unwrap().erased.len(), 1);
                    committed.wait();
                    ledger.scrub_erased().unwrap();
                    committed.wait();
                }
            });
        }
    });
    let runs = ledger.scrubs.runs();
    assert_eq!(ledger.scrubs.rewrites(), 0, "every record kept its cell");
    assert_eq!(runs, 5, "{runs} scrubs for 5 rounds of 8 erasures committed together");
    let report = ledger.verify().unwrap();
    assert_eq!((report.erased_turns, report.redactions), (40, 40));
    for entry in fs_err::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = fs_err::read(&path).unwrap();
        assert!(!bytes.windows(7).any(|w| w == b"SECRET-"), "{}", path.display());
    }
}

/// A small deterministic generator (xorshift), so that a failure replays.
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn marked_turn(ns: &Namespace, session: &str, index: u32, marker: &str, len: usize) -> Turn {
    Turn {
        namespace: ns.clone(),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: Role::User,
        speaker: None,
        text: marker.repeat(len.div_ceil(marker.len())),
        time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
        meta: serde_json::Map::new(),
    }
}

/// Which markers the ledger's files still hold.
fn markers_in_files(dir: &std::path::Path, markers: &[String]) -> HashSet<String> {
    let mut found = HashSet::new();
    for entry in fs_err::read_dir(dir).unwrap() {
        let bytes = fs_err::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        found.extend(markers.iter().filter(|m| text.contains(m.as_str())).cloned());
    }
    found
}

/// Erasures between appends, of texts from a few bytes to several overflow pages, scrubbed
/// without rewriting the file: no byte of an erased text is left in any file, every live text
/// is still there; a turn too short to keep its cell makes its scrub a rewrite.
#[test]
fn erasures_scrubbed_in_place_leave_no_text_behind() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let ns = Namespace::new("alice").unwrap();
    let mut draws = Draws(0x9e37_79b9_7f4a_7c15);
    // Record number -> marker of the live turns; numbers count redactions too.
    let mut live: Vec<(TurnId, String)> = Vec::new();
    let (mut erased, mut all) = (Vec::new(), Vec::new());
    let mut next_number = 1;
    for round in 0..6u32 {
        let turns: Vec<Turn> = (0..150u32)
            .map(|k| {
                let marker = format!("<M{round:02}-{k:03}>");
                let len = match draws.below(10) {
                    0 => 4_000 + draws.below(12_000) as usize,
                    _ => 12 + draws.below(600) as usize,
                };
                all.push(marker.clone());
                marked_turn(&ns, &format!("s{round}-{}", k % 5), k, &marker, len)
            })
            .collect();
        ledger.append(&turns).unwrap();
        for marker in &all[all.len() - turns.len()..] {
            live.push((TurnId::from_raw(next_number), marker.clone()));
            next_number += 1;
        }
        for _ in 0..12 {
            let (id, marker) = live.swap_remove(draws.below(live.len() as u64) as usize);
            let receipt = ledger.erase(&EraseTarget::Record(ns.clone(), id)).unwrap();
            assert_eq!(receipt.erased.len(), 1);
            erased.push(marker);
            next_number += 1;
        }
    }
    assert_eq!((ledger.scrubs.runs(), ledger.scrubs.rewrites()), (72, 0));
    let found = markers_in_files(dir.path(), &all);
    let left: Vec<_> = erased.iter().filter(|m| found.contains(*m)).collect();
    assert!(left.is_empty(), "erased texts still in the files: {left:?}");
    assert_eq!(found.len(), all.len() - erased.len(), "every live text is in the files");

    let short = marked_turn(&ns, "short", 0, "<tiny>", 6);
    ledger.append(std::slice::from_ref(&short)).unwrap();
    ledger.erase(&EraseTarget::Record(ns.clone(), TurnId::from_raw(next_number))).unwrap();
    assert_eq!(ledger.scrubs.rewrites(), 1, "a turn of 6 bytes may outgrow its cell once cleared");
    assert!(markers_in_files(dir.path(), &["<tiny>".to_owned()]).is_empty());
    let report = ledger.verify().unwrap();
    assert_eq!((report.erased_turns, report.redactions), (73, 73));
}
