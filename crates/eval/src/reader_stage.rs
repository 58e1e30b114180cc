//! The reader stage: the shared reader answers every question from each system's packed
//! context, and the answers are scored (LoCoMo: the released token F1 per category;
//! LongMemEval: the released judge prompts, read by a judge model, plus answer containment).
//!
//! Every system gets the same reader, the same prompt builder ([`build_answer_prompt`], the one
//! `Memory::answer` uses) and the same decoding, so the comparison between systems is the
//! comparison of what they packed. Answers and verdicts are cached by reader identity, prompt
//! digest and decoding settings: an interrupted run resumes where it stopped.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use anyhow::Context;
use evicortex_reader::{
    AnswerCache, AnswerPrompt, AnswerRequest, CacheOutcome, ChatMessage, ChatRole,
    DecodingSettings, Reader, build_answer_prompt, strip_citations,
};
use serde::Serialize;

use crate::{
    answer_score::{
        Answerability, JUDGE_DECODING, LocomoCategory, contains_answer, judge_label,
        locomo_answer_score, longmemeval_judge_prompt,
    },
    datasets::longmemeval::QuestionType,
    eval_question::EvalQuestion,
    runner::Benchmark,
    systems::SystemOutput,
};

/// Who judges LongMemEval answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeSetting {
    /// The shared reader judges its own answers (the default; a small judge is lenient and
    /// erratic: read its figures beside containment).
    Reader,
    /// A named local reader.
    Local(String),
    /// The chat-completions endpoint the `EVICORTEX_JUDGE_*` variables name.
    Endpoint,
    /// No judge: containment only.
    None,
}

/// Writes the answer cache at `cache` to `file` as JSON lines; returns how many answers.
pub fn export_answers(cache: &std::path::Path, file: &std::path::Path) -> anyhow::Result<usize> {
    if !cache.exists() {
        anyhow::bail!("no answer cache at {}", cache.display());
    }
    let opened = AnswerCache::open(cache)
        .with_context(|| format!("opening the answer cache {}", cache.display()))?;
    Ok(opened.export_jsonl(file)?)
}

/// Adds the answers `file` holds (written by [`export_answers`]) to the cache at `cache`,
/// creating it if needed; returns how many lines the file held.
pub fn import_answers(cache: &std::path::Path, file: &std::path::Path) -> anyhow::Result<usize> {
    let opened = AnswerCache::open(cache)
        .with_context(|| format!("opening the answer cache {}", cache.display()))?;
    Ok(opened.import_jsonl(file)?)
}

/// Settings of the reader stage, recorded in the report.
#[derive(Clone, Debug, Serialize)]
pub struct ReaderStageSpec {
    /// The local reader's name, or `endpoint` for the chat-completions client.
    pub reader: String,
    /// Who judges LongMemEval answers.
    pub judge: JudgeSetting,
    /// Most tokens generated per answer.
    pub max_new_tokens: u32,
    /// The answer cache (SQLite). The report records its file name only: a committed report
    /// names no folder of the machine that ran it.
    #[serde(serialize_with = "file_name_only")]
    pub cache: PathBuf,
}

fn file_name_only<S: serde::Serializer>(path: &std::path::Path, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(&path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
}

/// The loaded stage.
pub struct ReaderStage {
    reader: Arc<dyn Reader>,
    judge: Option<Arc<dyn Reader>>,
    cache: AnswerCache,
    decoding: DecodingSettings,
    benchmark: Benchmark,
}

/// One answer and its scores.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnswerOutcome {
    /// The reply, verbatim.
    pub text: String,
    /// Records cited that the context holds.
    pub citations: Vec<u64>,
    /// Whether the reply is the abstention.
    pub abstained: bool,
    /// LoCoMo's released score (F1, or the adversarial rule); `None` on LongMemEval.
    pub f1: Option<f64>,
    /// The judge's verdict (LongMemEval with a judge).
    pub judge_correct: Option<bool>,
    /// The judge's reply, verbatim.
    pub judge_reply: Option<String>,
    /// Whether the reply contains the gold answer's tokens.
    pub contained: bool,
    /// The full prompt in the reader's tokens.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub generated_tokens: u32,
    /// Seconds of the read (when it was first made, for a cached answer).
    pub seconds: f64,
    /// Seconds on the prompt and on generation, where the reader measures them.
    pub timing: Option<evicortex_reader::ReadTiming>,
    /// Whether the answer came from the cache.
    pub cached: bool,
}

/// Answer accuracy of one system at one budget, overall and per question kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AnswerSummary {
    /// Over every question read.
    pub overall: AnswerScores,
    /// Per question type (LongMemEval) or category (LoCoMo).
    pub by_kind: BTreeMap<String, AnswerScores>,
}

/// Mean answer scores over a set of questions.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AnswerScores {
    /// Questions read.
    pub n: usize,
    /// Mean LoCoMo score (F1; adversarial: the abstention rule).
    pub f1: Option<f64>,
    /// Share the judge accepted.
    pub judge_accuracy: Option<f64>,
    /// Share containing the gold answer.
    pub containment: f64,
    /// Share the reader abstained on.
    pub abstained: f64,
    /// Mean prompt tokens.
    pub prompt_tokens: f64,
    /// Mean generated tokens.
    pub generated_tokens: f64,
    /// Mean seconds per read.
    pub seconds: f64,
    /// Prompt tokens per second of prompt processing (reads the reader timed).
    pub prompt_tokens_per_s: Option<f64>,
    /// Generated tokens per second of generation (reads the reader timed).
    pub generated_tokens_per_s: Option<f64>,
    #[serde(skip)]
    sums: Sums,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Sums {
    f1: f64,
    f1_n: usize,
    judged: usize,
    judge_yes: usize,
    contained: usize,
    abstained: usize,
    prompt_tokens: u64,
    generated_tokens: u64,
    seconds: f64,
    timed_prompt_tokens: u64,
    prompt_seconds: f64,
    timed_generated_tokens: u64,
    generation_seconds: f64,
}

impl AnswerScores {
    fn add(&mut self, o: &AnswerOutcome) {
        self.n += 1;
        let s = &mut self.sums;
        if let Some(f1) = o.f1 {
            s.f1 += f1;
            s.f1_n += 1;
        }
        if let Some(yes) = o.judge_correct {
            s.judged += 1;
            s.judge_yes += usize::from(yes);
        }
        s.contained += usize::from(o.contained);
        s.abstained += usize::from(o.abstained);
        s.prompt_tokens += u64::from(o.prompt_tokens);
        s.generated_tokens += u64::from(o.generated_tokens);
        s.seconds += o.seconds;
        if let Some(t) = o.timing {
            s.timed_prompt_tokens += u64::from(o.prompt_tokens);
            s.prompt_seconds += t.prompt_seconds;
            // The first generated token comes out of the prompt pass.
            s.timed_generated_tokens += u64::from(o.generated_tokens.saturating_sub(1));
            s.generation_seconds += t.generation_seconds;
        }
        let rate = |tokens: u64, seconds: f64| (seconds > 0.0).then(|| tokens as f64 / seconds);
        self.prompt_tokens_per_s = rate(s.timed_prompt_tokens, s.prompt_seconds);
        self.generated_tokens_per_s = rate(s.timed_generated_tokens, s.generation_seconds);
        let n = self.n as f64;
        self.f1 = (s.f1_n > 0).then(|| s.f1 / s.f1_n as f64);
        self.judge_accuracy = (s.judged > 0).then(|| s.judge_yes as f64 / s.judged as f64);
        self.containment = s.contained as f64 / n;
        self.abstained = s.abstained as f64 / n;
        self.prompt_tokens = s.prompt_tokens as f64 / n;
        self.generated_tokens = s.generated_tokens as f64 / n;
        self.seconds = s.seconds / n;
    }
}

impl AnswerSummary {
    /// Adds one question's outcome.
    pub fn add(&mut self, kind: &str, outcome: &AnswerOutcome) {
        self.overall.add(outcome);
        self.by_kind.entry(kind.to_owned()).or_default().add(outcome);
    }
}

impl std::fmt::Debug for ReaderStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderStage")
            .field("reader", &self.reader.identity())
            .field("judge", &self.judge.as_ref().map(|j| j.identity().clone()))
            .field("decoding", &self.decoding)
            .finish()
    }
}

impl ReaderStage {
    /// A stage reading with `reader`, judging with `judge`, caching in `cache`.
    pub fn new(
        reader: Arc<dyn Reader>,
        judge: Option<Arc<dyn Reader>>,
        cache: &std::path::Path,
        max_new_tokens: u32,
        benchmark: Benchmark,
    ) -> anyhow::Result<ReaderStage> {
        let cache = AnswerCache::open(cache)
            .with_context(|| format!("opening the answer cache {}", cache.display()))?;
        let decoding = DecodingSettings::greedy(max_new_tokens);
        Ok(ReaderStage { reader, judge, cache, decoding, benchmark })
    }

    /// The reader.
    pub fn reader(&self) -> &Arc<dyn Reader> {
        &self.reader
    }

    /// The judge, when LongMemEval answers are judged.
    pub fn judge(&self) -> Option<&Arc<dyn Reader>> {
        self.judge.as_ref()
    }

    /// Reads `output`'s packed context for `question` and scores the answer.
    pub fn answer(
        &self,
        question: &EvalQuestion,
        output: &SystemOutput,
    ) -> anyhow::Result<AnswerOutcome> {
        let prompt = build_answer_prompt(&AnswerRequest {
            question: &question.query,
            context: &output.text,
            question_date: question.gold.question_date.as_deref(),
        });
        let (answer, cached) = self
            .cache
            .answer(self.reader.as_ref(), &prompt, &self.decoding)
            .with_context(|| format!("reading question {}", question.id))?;
        let response = strip_citations(&answer.text);
        let gold = &question.gold.answer;
        let mut outcome = AnswerOutcome {
            contained: contains_answer(&response, [gold.as_str()]),
            text: answer.text.clone(),
            citations: answer.citations.iter().map(|r| r.raw()).collect(),
            abstained: answer.abstained,
            f1: None,
            judge_correct: None,
            judge_reply: None,
            prompt_tokens: answer.prompt_tokens,
            generated_tokens: answer.generated_tokens,
            seconds: answer.seconds,
            timing: answer.timing,
            cached: cached == CacheOutcome::Hit,
        };
        match self.benchmark {
            Benchmark::Locomo => {
                let category = question
                    .gold
                    .locomo_category
                    .and_then(LocomoCategory::from_number)
                    .with_context(|| format!("question {} has no LoCoMo category", question.id))?;
                outcome.f1 = Some(locomo_answer_score(category, &response, gold));
            }
            Benchmark::LongMemEval => {
                if let Some(judge) = &self.judge {
                    let kind = QuestionType::parse(&question.kind).with_context(|| {
                        format!("question {}: unknown type {}", question.id, question.kind)
                    })?;
                    let text = longmemeval_judge_prompt(
                        kind,
                        Answerability::of_question_id(&question.id),
                        &question.query,
                        gold,
                        &response,
                    );
                    let judge_prompt = AnswerPrompt {
                        messages: vec![ChatMessage { role: ChatRole::User, content: text }],
                        context_records: Vec::new(),
                    };
                    let (verdict, _) = self
                        .cache
                        .answer(judge.as_ref(), &judge_prompt, &JUDGE_DECODING)
                        .with_context(|| format!("judging question {}", question.id))?;
                    outcome.judge_correct = Some(judge_label(&verdict.text));
                    outcome.judge_reply = Some(verdict.text);
                }
            }
        }
        Ok(outcome)
    }
}

impl ReaderStage {
    /// Loads the reader (and judge) `spec` names.
    pub fn load(spec: &ReaderStageSpec, benchmark: Benchmark) -> anyhow::Result<ReaderStage> {
        let reader = open_reader(&spec.reader)?;
        let judge = match (&spec.judge, benchmark) {
            (_, Benchmark::Locomo) | (JudgeSetting::None, _) => None,
            (JudgeSetting::Reader, _) => Some(reader.clone()),
            (JudgeSetting::Local(name), _) => Some(open_reader(name)?),
            (JudgeSetting::Endpoint, _) => Some(open_reader("endpoint")?),
        };
        ReaderStage::new(reader, judge, &spec.cache, spec.max_new_tokens, benchmark)
    }

    /// The report's reader record: identities, decoding and the cache.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "reader": self.reader.identity(),
            "reader_label": self.reader.identity().label(),
            "reader_tokenizer": self.reader.tokenizer().map(|t| t.name().to_owned()),
            "context_window": self.reader.context_window(),
            "judge": self.judge.as_ref().map(|j| j.identity().clone()),
            "decoding": self.decoding,
            "judge_decoding": JUDGE_DECODING,
        })
    }

    /// How to read the answer figures.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "answers: every system's packed context is read by the same reader ({}), greedy, at \
             most {} new tokens, with the prompt `Memory::answer` uses; answers are scored with \
             their [#record] citations removed",
            self.reader.identity().label(),
            self.decoding.max_new_tokens
        )];
        match (self.benchmark, &self.judge) {
            (Benchmark::Locomo, _) => notes.push(
                "answers: LoCoMo's released scores (Porter-stemmed token F1; multi-hop: \
                 multi-answer F1; open-domain: first `;` part; adversarial: 1 when the answer \
                 says the information is absent), plus answer containment"
                    .to_owned(),
            ),
            (Benchmark::LongMemEval, Some(judge)) => notes.push(format!(
                "answers: LongMemEval's released judge prompts read by {} (a small judge is \
                 lenient and erratic: read it beside containment, which is deterministic)",
                judge.identity().label()
            )),
            (Benchmark::LongMemEval, None) => {
                notes.push("answers: no judge; containment only".to_owned())
            }
        }
        notes
    }
}

/// The reader `name` names: `endpoint` (the chat-completions client the environment
/// configures) or a committed local GGUF reader.
pub fn open_reader(name: &str) -> anyhow::Result<Arc<dyn Reader>> {
    if name == "endpoint" {
        let client = evicortex_reader::ChatCompletionsClient::from_env()
            .context("the chat-completions reader")?;
        return Ok(Arc::new(client));
    }
    let reader = evicortex_reader::LocalGgufReader::load_pinned(name)
        .with_context(|| format!("loading the reader {name}"))?;
    Ok(Arc::new(reader))
}

/// The answer tables of `report`, beside the same run's retrieval figures.
pub fn answers_markdown(report: &crate::report::Report, cutoffs: &[usize], md: &mut String) {
    use std::fmt::Write as _;
    if report.answers.is_empty() {
        return;
    }
    let k = cutoffs.iter().max().copied().unwrap_or(10);
    let packed = crate::scoring::PACKED;
    let label = report
        .reader
        .as_ref()
        .and_then(|r| r["reader_label"].as_str())
        .unwrap_or("the reader")
        .to_owned();
    let _ = writeln!(md, "\n## Answers read by {label}\n");
    let _ = writeln!(
        md,
        "| system | budget | n read | F1 (LoCoMo) | judge accuracy | containment | abstained | session recall_all@{k} | turn recall_all@{packed} | prompt tokens | generated tokens | s/question | prompt tok/s | generated tok/s |"
    );
    let _ = writeln!(
        md,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.4}"));
    for (name, budgets) in &report.answers {
        for (budget, summary) in budgets {
            let retrieval = report.systems.get(name).and_then(|s| s.budgets.get(budget));
            let session =
                retrieval.and_then(|r| r.overall.session.get(&format!("recall_all@{k}")).copied());
            let turn = retrieval
                .and_then(|r| r.overall.turn.get(&format!("recall_all@{packed}")).copied());
            let o = &summary.overall;
            let _ = writeln!(
                md,
                "| {name} | {budget} | {} | {} | {} | {:.4} | {:.4} | {} | {} | {:.0} | {:.1} | {:.2} | {} | {} |",
                o.n,
                opt(o.f1),
                opt(o.judge_accuracy),
                o.containment,
                o.abstained,
                opt(session),
                opt(turn),
                o.prompt_tokens,
                o.generated_tokens,
                o.seconds,
                o.prompt_tokens_per_s.map_or("-".to_owned(), |v| format!("{v:.0}")),
                o.generated_tokens_per_s.map_or("-".to_owned(), |v| format!("{v:.1}")),
            );
        }
    }
    let _ = writeln!(md, "\n### Answers by question type\n");
    let _ = writeln!(md, "| system | budget | type | n | F1 | judge | containment | abstained |");
    let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, budgets) in &report.answers {
        for (budget, summary) in budgets {
            for (kind, s) in &summary.by_kind {
                let _ = writeln!(
                    md,
                    "| {name} | {budget} | {kind} | {} | {} | {} | {:.4} | {:.4} |",
                    s.n,
                    opt(s.f1),
                    opt(s.judge_accuracy),
                    s.containment,
                    s.abstained
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_answer_cache_file_but_not_its_folder() {
        let spec = ReaderStageSpec {
            reader: "r".to_owned(),
            judge: JudgeSetting::None,
            max_new_tokens: 8,
            cache: PathBuf::from("/home/someone/stores/lme/answers.sqlite"),
        };
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["cache"], "answers.sqlite");
    }
}
