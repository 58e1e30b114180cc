//! Real LongMemEval S turns for the compiler's benchmarks, read without keeping the file.

use std::{io::BufReader, path::PathBuf};

use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};
use serde::Deserialize;

/// The LongMemEval S file: `$EVICORTEX_DATA_DIR/longmemeval/` or `../shared/data/longmemeval/`.
pub fn data_file() -> PathBuf {
    let data_dir = std::env::var_os("EVICORTEX_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    data_dir.join("longmemeval/longmemeval_s_cleaned.499of500.json.gz")
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: String,
}

#[derive(Deserialize)]
struct Question {
    question: String,
    haystack_dates: Vec<String>,
    haystack_session_ids: Vec<String>,
    haystack_sessions: Vec<Vec<Message>>,
}

/// The first `want` turns of the file (in record order) and every question seen, read with a
/// visitor that skips the rest of the array without keeping it.
pub fn load(path: &std::path::Path, want: usize) -> (Vec<Evidence>, Vec<String>) {
    let file = fs_err::File::open(path).unwrap_or_else(|e| panic!("{e} (set EVICORTEX_DATA_DIR)"));
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let (evidence, questions) = serde::Deserializer::deserialize_seq(&mut de, Collect { want })
        .expect("valid LongMemEval JSON");
    (evidence, questions)
}

struct Collect {
    want: usize,
}

impl<'de> serde::de::Visitor<'de> for Collect {
    type Value = (Vec<Evidence>, Vec<String>);
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of LongMemEval questions")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let namespace = Namespace::new("bench").expect("valid");
        let mut evidence = Vec::with_capacity(self.want);
        let mut questions = Vec::new();
        while evidence.len() < self.want {
            let Some(q) = seq.next_element::<Question>()? else { break };
            questions.push(q.question);
            for ((session, date), id) in
                q.haystack_sessions.into_iter().zip(&q.haystack_dates).zip(&q.haystack_session_ids)
            {
                let time = longmemeval_time(date);
                for (i, m) in session.into_iter().enumerate() {
                    if evidence.len() == self.want {
                        break;
                    }
                    let seq_id = evidence.len() as u64 + 1;
                    evidence.push(Evidence {
                        id: TurnId::from_raw(seq_id),
                        digest: EvidenceDigest::from_bytes(record_digest(seq_id)),
                        turn: Turn {
                            namespace: namespace.clone(),
                            session: SessionId::new(&format!("{}-{id}", questions.len()))
                                .expect("valid session id"),
                            turn: TurnIndex::new(i as u32),
                            role: if m.role == "user" { Role::User } else { Role::Assistant },
                            speaker: None,
                            text: m.content,
                            time,
                            meta: Default::default(),
                        },
                    });
                }
            }
        }
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok((evidence, questions))
    }
}

/// A stand-in record digest (the benchmark has no ledger); distinct per record.
fn record_digest(seq: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seq.to_le_bytes());
    bytes
}

/// `2023/05/30 (Tue) 21:56` as UTC (the dataset gives no zone).
fn longmemeval_time(raw: &str) -> EventTime {
    let (date, rest) = raw.split_once(' ').expect("date then weekday");
    let clock = rest.rsplit(' ').next().expect("time of day");
    EventTime::parse_rfc3339(&format!("{}T{clock}:00Z", date.replace('/', "-")))
        .expect("LongMemEval timestamp")
}
