use std::sync::Arc;

use evicortex::{IngestOptions, Memory, Namespace, parse_jsonl};

#[test]
fn one_memory_serves_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(Memory::open(dir.path()).unwrap());
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
