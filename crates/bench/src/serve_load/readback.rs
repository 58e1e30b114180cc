//! The read-back after the load: every acknowledged turn is in its namespace's export with its
//! text byte for byte, exactly once, and every turn erased through the load is not.

use std::{collections::HashSet, io::Read};

use anyhow::{Context, bail, ensure};
use serde::{
    Deserialize,
    de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

use super::traffic::{Acked, text};

/// What the read-back found.
#[derive(Debug, Default)]
pub struct ReadBack {
    /// Acknowledged turns found, text identical.
    pub stored: u64,
    /// Turns of this run stored past the last acknowledged turn of their connection (a request
    /// that failed after the server committed it): not a loss.
    pub unacknowledged: u64,
    /// Erased turns checked absent.
    pub erased_absent: u64,
}

/// Checks `acked` (by connection, in the order acknowledged) against the exports, read one
/// namespace at a time through `export(namespace_index)`.
pub fn check(
    run: &str,
    namespaces: usize,
    acked: &[Vec<Acked>],
    erased: &[Acked],
    uncertain: &[Acked],
    mut export: impl FnMut(usize) -> anyhow::Result<Box<dyn Read>>,
) -> anyhow::Result<ReadBack> {
    // seen[conn][turn]: 0 not seen, else 1 + the namespace it was found in.
    let mut seen: Vec<Vec<u16>> = acked
        .iter()
        .map(|turns| vec![0; turns.iter().map(|a| a.turn as usize + 1).max().unwrap_or(0)])
        .collect();
    let mut found = ReadBack::default();
    for ns in 0..namespaces {
        let reader = export(ns)?;
        let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
        let mut sink = Sink { run, ns: ns as u16, seen: &mut seen, extra: 0, error: None };
        ExportSeed(&mut sink)
            .deserialize(&mut de)
            .with_context(|| format!("reading the export of namespace {ns}"))?;
        if let Some(error) = sink.error {
            bail!("namespace {ns}: {error}");
        }
        found.unacknowledged += sink.extra;
    }
    let erased: HashSet<(u32, u32)> = erased.iter().map(|a| (a.conn, a.turn)).collect();
    let uncertain: HashSet<(u32, u32)> = uncertain.iter().map(|a| (a.conn, a.turn)).collect();
    let mut lost = Vec::new();
    for turn in acked.iter().flatten() {
        let at = seen[turn.conn as usize][turn.turn as usize];
        let key = (turn.conn, turn.turn);
        if uncertain.contains(&key) {
            continue;
        }
        if erased.contains(&key) {
            ensure!(
                at == 0,
                "erased turn {} of connection {} is still exported",
                turn.turn,
                turn.conn
            );
            found.erased_absent += 1;
        } else if at == turn.namespace + 1 {
            found.stored += 1;
        } else {
            lost.push(*turn);
        }
    }
    ensure!(
        lost.is_empty(),
        "{} acknowledged turns are not stored (first: turn {} of connection {} in namespace {})",
        lost.len(),
        lost[0].turn,
        lost[0].conn,
        lost[0].namespace
    );
    Ok(found)
}

struct Sink<'a> {
    run: &'a str,
    ns: u16,
    seen: &'a mut Vec<Vec<u16>>,
    extra: u64,
    error: Option<String>,
}

impl Sink<'_> {
    fn see(&mut self, turn: ExportedTurn) {
        let Some(conn) = turn
            .session
            .strip_prefix(self.run)
            .and_then(|s| s.strip_prefix("-c"))
            .and_then(|c| c.parse::<u32>().ok())
        else {
            return; // not a turn of this run
        };
        let slot = self.seen.get_mut(conn as usize).and_then(|s| s.get_mut(turn.turn as usize));
        let Some(slot) = slot else {
            self.extra += 1;
            return;
        };
        if self.error.is_some() {
            return;
        }
        if *slot != 0 {
            self.error = Some(format!("turn {} of connection {conn} is exported twice", turn.turn));
        } else if turn.text != text(self.run, conn, turn.turn) {
            self.error = Some(format!(
                "turn {} of connection {conn} has other text: {:?}",
                turn.turn, turn.text
            ));
        }
        *slot = self.ns + 1;
    }
}

#[derive(Deserialize)]
struct ExportedTurn {
    session: String,
    turn: u32,
    text: String,
}

/// `{"namespace": ..., "turns": [...]}`, each turn handed to the sink as it is parsed: an
/// export of millions of turns is never held whole.
struct ExportSeed<'s, 'a>(&'s mut Sink<'a>);

impl<'de> DeserializeSeed<'de> for ExportSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ExportSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an export object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "turns" {
                map.next_value_seed(TurnsSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct TurnsSeed<'s, 'a>(&'s mut Sink<'a>);

impl<'de> DeserializeSeed<'de> for TurnsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TurnsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of turns")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(turn) = seq.next_element::<ExportedTurn>()? {
            self.0.see(turn);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export_of(turns: &[(u32, u32, String)]) -> Box<dyn Read> {
        let turns: Vec<_> = turns
            .iter()
            .map(|(conn, turn, text)| {
                serde_json::json!({"namespace": "n", "session": format!("r-c{conn}"), "turn": turn,
                    "role": "user", "text": text, "time": "2024-05-01T00:00:00Z"})
            })
            .collect();
        let body = serde_json::json!({"namespace": "n", "turns": turns}).to_string();
        Box::new(std::io::Cursor::new(body.into_bytes()))
    }

    fn ours(conn: u32, turn: u32) -> (u32, u32, String) {
        (conn, turn, text("r", conn, turn))
    }

    #[test]
    fn a_missing_a_changed_or_a_resurrected_turn_fails_the_read_back() {
        let acked = vec![
            (0..3).map(|turn| Acked { namespace: 0, conn: 0, turn }).collect::<Vec<_>>(),
            vec![Acked { namespace: 0, conn: 1, turn: 0 }],
        ];
        let erased = [Acked { namespace: 0, conn: 0, turn: 1 }];
        let run = |turns: Vec<(u32, u32, String)>| {
            check("r", 1, &acked, &erased, &[], |_| Ok(export_of(&turns)))
        };
        let all = run(vec![ours(0, 0), ours(0, 2), ours(1, 0), (9, 0, "seed".into())]).unwrap();
        assert_eq!((all.stored, all.erased_absent, all.unacknowledged), (3, 1, 1));

        let lost = run(vec![ours(0, 0), ours(0, 2)]).unwrap_err().to_string();
        assert!(lost.contains("1 acknowledged turns are not stored"), "{lost}");
        let changed = run(vec![ours(0, 0), ours(0, 2), (1, 0, "other".into())]);
        assert!(format!("{:#}", changed.unwrap_err()).contains("other text"));
        let back = run(vec![ours(0, 0), ours(0, 1), ours(0, 2), ours(1, 0)]);
        assert!(back.unwrap_err().to_string().contains("still exported"));
        let twice = run(vec![ours(0, 0), ours(0, 2), ours(0, 2), ours(1, 0)]);
        assert!(format!("{:#}", twice.unwrap_err()).contains("exported twice"));
    }

    #[test]
    fn a_turn_found_in_another_namespace_than_it_was_sent_to_is_not_stored() {
        let acked = vec![vec![Acked { namespace: 1, conn: 0, turn: 0 }]];
        let exports = |ns: usize| Ok(export_of(&if ns == 0 { vec![ours(0, 0)] } else { vec![] }));
        let err = check("r", 2, &acked, &[], &[], exports).unwrap_err();
        assert!(err.to_string().contains("not stored"), "{err}");
    }
}
