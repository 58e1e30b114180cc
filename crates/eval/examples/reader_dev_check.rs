//! Which pinned reader reads conversations best, and how fast: every committed (or named) GGUF
//! reader answers a stratified sample of LoCoMo dev and LongMemEval dev questions with the
//! oracle evidence as its context, scored by LoCoMo's released F1, answer containment and the
//! abstention rules; prompt and generated tokens per second are measured on the same reads.
//!
//! ```text
//! cargo run --release -p evicortex-eval --example reader_dev_check -- \
//!     [--per-category 4] [--per-type 2] [--max-new-tokens 48] [MODEL...]
//! ```
//! Data: `$EVICORTEX_DATA_DIR`, else `../shared/data`. Dev questions only.

use std::{collections::BTreeMap, io::Read as _, path::PathBuf};

use evicortex_eval::answer_score::{LocomoCategory, contains_answer, locomo_answer_score};
use evicortex_reader::{
    Answer, AnswerRequest, DecodingSettings, GgufManifest, LocalGgufReader, Reader, answer,
    build_answer_prompt,
};

struct Question {
    set: &'static str,
    stratum: String,
    id: String,
    question: String,
    gold: String,
    unanswerable: bool,
    question_date: Option<String>,
    context: String,
    locomo_category: Option<LocomoCategory>,
}

#[derive(Default)]
struct Tally {
    n: usize,
    score: f64,
    contained: usize,
    abstained: usize,
    cited_context: usize,
    invented: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let take = |args: &mut Vec<String>, flag: &str, default: usize| -> usize {
        match args.iter().position(|a| a == flag) {
            Some(i) => {
                let value = args.remove(i + 1).parse().expect("a number");
                args.remove(i);
                value
            }
            None => default,
        }
    };
    let per_category = take(&mut args, "--per-category", 4);
    let per_type = take(&mut args, "--per-type", 2);
    let max_new_tokens = take(&mut args, "--max-new-tokens", 48) as u32;
    let models: Vec<String> = if args.is_empty() {
        GgufManifest::committed().into_iter().map(|m| m.name).collect()
    } else {
        args
    };
    let data = data_dir();
    let mut questions = locomo_questions(&data, per_category)?;
    questions.extend(longmemeval_questions(&data, per_type)?);
    println!(
        "{} questions ({} LoCoMo dev, {} LongMemEval dev), oracle evidence, greedy, at most {} new tokens",
        questions.len(),
        questions.iter().filter(|q| q.set == "locomo").count(),
        questions.iter().filter(|q| q.set == "longmemeval").count(),
        max_new_tokens
    );
    let decoding = DecodingSettings::greedy(max_new_tokens);
    for name in models {
        let reader = LocalGgufReader::load_pinned(&name)?;
        let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
        let (mut prompt_tokens, mut prompt_seconds) = (0u64, 0f64);
        let (mut generated_tokens, mut generation_seconds) = (0u64, 0f64);
        for q in &questions {
            let prompt = build_answer_prompt(&AnswerRequest {
                question: &q.question,
                context: &q.context,
                question_date: q.question_date.as_deref(),
            });
            let reply: Answer = answer(&reader, &prompt, &decoding)?;
            let timing = reply.timing.ok_or("local reads are timed")?;
            prompt_tokens += u64::from(reply.prompt_tokens);
            generated_tokens += u64::from(reply.generated_tokens);
            prompt_seconds += timing.prompt_seconds;
            generation_seconds += timing.generation_seconds;
            let contained = if q.unanswerable {
                reply.abstained
            } else {
                contains_answer(&reply.text, [q.gold.as_str()])
            };
            let score = match q.locomo_category {
                Some(category) => locomo_answer_score(category, &reply.text, &q.gold),
                None => f64::from(u8::from(contained)),
            };
            for key in [(q.set.to_owned(), q.stratum.clone()), (q.set.to_owned(), "all".into())] {
                let t = tallies.entry(key).or_default();
                t.n += 1;
                t.score += score;
                t.contained += usize::from(contained);
                t.abstained += usize::from(reply.abstained);
                t.cited_context += usize::from(!reply.citations.is_empty());
                t.invented += usize::from(!reply.unknown_citations.is_empty());
            }
            println!("  {name} {} {}: {:?} -> {:?}", q.set, q.id, q.gold, reply.text);
        }
        println!("\n{name} ({})", reader.identity().digest());
        println!(
            "| set | stratum | n | score | contained | abstained | cites context | invents ids |"
        );
        println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for ((set, stratum), t) in &tallies {
            let share = |k: usize| format!("{:.2}", k as f64 / t.n as f64);
            println!(
                "| {set} | {stratum} | {} | {:.3} | {} | {} | {} | {} |",
                t.n,
                t.score / t.n as f64,
                share(t.contained),
                share(t.abstained),
                share(t.cited_context),
                share(t.invented)
            );
        }
        println!(
            "speed: {} prompt tokens in {:.1} s = {:.1} prompt tokens/s; {} generated tokens in {:.1} s = {:.1} generated tokens/s\n",
            prompt_tokens,
            prompt_seconds,
            prompt_tokens as f64 / prompt_seconds,
            generated_tokens,
            generation_seconds,
            generated_tokens as f64 / generation_seconds
        );
    }
    Ok(())
}

fn data_dir() -> PathBuf {
    match std::env::var_os("EVICORTEX_DATA_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    }
}

fn locomo_questions(
    data: &std::path::Path,
    per_category: usize,
) -> Result<Vec<Question>, Box<dyn std::error::Error>> {
    let json: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(data.join("locomo/locomo10.dev.json"))?)?;
    let mut taken: BTreeMap<u64, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for sample in json.as_array().ok_or("locomo: not an array")? {
        let conversation = &sample["conversation"];
        // Every turn by dialogue id, with its session date and a record number.
        let mut turns: BTreeMap<String, (usize, String, String, String)> = BTreeMap::new();
        let mut record = 0;
        for session in 1.. {
            let Some(list) = conversation[format!("session_{session}")].as_array() else { break };
            let date = conversation[format!("session_{session}_date_time")]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            for turn in list {
                record += 1;
                turns.insert(
                    turn["dia_id"].as_str().unwrap_or_default().to_owned(),
                    (
                        record,
                        format!("D{session}"),
                        date.clone(),
                        format!(
                            "{}: {}",
                            turn["speaker"].as_str().unwrap_or_default(),
                            turn["text"].as_str().unwrap_or_default()
                        ),
                    ),
                );
            }
        }
        for (i, qa) in sample["qa"].as_array().ok_or("locomo: qa")?.iter().enumerate() {
            let category = qa["category"].as_u64().ok_or("locomo: category")?;
            let count = taken.entry(category).or_default();
            if *count >= per_category {
                continue;
            }
            let mut evidence: Vec<&(usize, String, String, String)> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str())
                .flat_map(|e| e.split(';').map(str::trim))
                .filter_map(|id| turns.get(id))
                .collect();
            if evidence.is_empty() {
                continue;
            }
            evidence.sort();
            evidence.dedup();
            *count += 1;
            let gold = if category == 5 { &qa["adversarial_answer"] } else { &qa["answer"] };
            out.push(Question {
                set: "locomo",
                stratum: format!("category {category}"),
                id: format!("{}#{i}", sample["sample_id"].as_str().unwrap_or_default()),
                question: qa["question"].as_str().unwrap_or_default().to_owned(),
                gold: match gold {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                unanswerable: category == 5,
                question_date: None,
                context: render(
                    evidence.iter().map(|(r, s, d, t)| (*r, s.as_str(), d.as_str(), t.as_str())),
                ),
                locomo_category: LocomoCategory::from_number(category as u32),
            });
        }
    }
    Ok(out)
}

fn longmemeval_questions(
    data: &std::path::Path,
    per_type: usize,
) -> Result<Vec<Question>, Box<dyn std::error::Error>> {
    let split = fs_err::read_to_string(data.join("longmemeval/split.tsv"))?;
    let dev: std::collections::HashSet<&str> = split
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.get(3) == Some(&"dev")).then_some(f[0])
        })
        .collect();
    let mut gz = String::new();
    flate2::read::GzDecoder::new(fs_err::File::open(
        data.join("longmemeval/longmemeval_oracle.json.gz"),
    )?)
    .read_to_string(&mut gz)?;
    let json: serde_json::Value = serde_json::from_str(&gz)?;
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for q in json.as_array().ok_or("longmemeval: not an array")? {
        let id = q["question_id"].as_str().unwrap_or_default();
        if !dev.contains(id) {
            continue;
        }
        let unanswerable = id.contains("_abs");
        let stratum = if unanswerable {
            "abstention".to_owned()
        } else {
            q["question_type"].as_str().unwrap_or_default().to_owned()
        };
        let count = taken.entry(stratum.clone()).or_default();
        if *count >= per_type {
            continue;
        }
        let mut turns = Vec::new();
        let mut record = 0;
        let sessions = q["haystack_sessions"].as_array().ok_or("longmemeval: sessions")?;
        for (s, session) in sessions.iter().enumerate() {
            let date = q["haystack_dates"][s].as_str().unwrap_or_default().to_owned();
            let session_id = q["haystack_session_ids"][s].as_str().unwrap_or_default().to_owned();
            for turn in session.as_array().into_iter().flatten() {
                record += 1;
                // Abstention questions have no evidence turn: give their sessions' user turns.
                let keep = turn["has_answer"].as_bool() == Some(true)
                    || (unanswerable && turn["role"] == "user");
                if keep {
                    let text = format!(
                        "{}: {}",
                        turn["role"].as_str().unwrap_or_default(),
                        turn["content"].as_str().unwrap_or_default()
                    );
                    turns.push((record, session_id.clone(), date.clone(), text));
                }
            }
        }
        if turns.is_empty() {
            continue;
        }
        *count += 1;
        out.push(Question {
            set: "longmemeval",
            stratum,
            id: id.to_owned(),
            question: q["question"].as_str().unwrap_or_default().to_owned(),
            gold: match &q["answer"] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            unanswerable,
            question_date: q["question_date"].as_str().map(str::to_owned),
            context: render(
                turns.iter().map(|(r, s, d, t)| (*r, s.as_str(), d.as_str(), t.as_str())),
            ),
            locomo_category: None,
        });
    }
    Ok(out)
}

/// The compiler's layout (preamble, a header per session with its date, `[#record]` per turn).
fn render<'a>(turns: impl Iterator<Item = (usize, &'a str, &'a str, &'a str)>) -> String {
    let mut out = String::from("Evidence from memory, oldest first. Cite as [#record].\n");
    let mut current = "";
    for (record, session, date, text) in turns {
        if session != current {
            out.push_str(&format!("\nSession {session} ({date}):\n"));
            current = session;
        }
        out.push_str(&format!("[#{record}] {text}\n"));
    }
    out
}
