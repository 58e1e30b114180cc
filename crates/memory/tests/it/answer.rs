//! `Memory::answer` with the real smallest reader (SmolLM2-135M-Instruct, a few tokens decoded).

use std::sync::OnceLock;

use evicortex::{
    AnswerError, AnswerRequest, ChatCompletionsClient, ChatCompletionsConfig, CompileConfig,
    CompileQuery, DecodingSettings, DenseConfig, IngestOptions, LocalGgufReader, Memory, Namespace,
    Reader, ReaderModelError, ReaderReadError, SupportSignal, TiktokenReader, TokenBudget,
    parse_jsonl,
};

use crate::test_store::TestStore;

const TEST_READER: &str = "smollm2-135m-instruct-q4_1";

fn reader() -> &'static LocalGgufReader {
    static READER: OnceLock<LocalGgufReader> = OnceLock::new();
    READER.get_or_init(|| match LocalGgufReader::load_pinned(TEST_READER) {
        Ok(reader) => reader,
        Err(err @ ReaderModelError::ModelMissing { .. }) => panic!(
            "{err}\nthis test needs the pinned reader: run `evicortex model fetch {TEST_READER}` \
             (scripts/test does)"
        ),
        Err(err) => panic!("loading {TEST_READER}: {err}"),
    })
}

/// A lexical-only memory holding `turns` turns about Lisbon in namespace alice.
fn memory_with(store: &TestStore, turns: usize) -> Memory {
    let memory = store.open();
    let mut jsonl = String::new();
    for i in 0..turns {
        let text = if i == 0 {
            "I moved to Lisbon in May and my cat Mimi came with me.".to_owned()
        } else {
            format!("Day {i} in Lisbon: the trams, the tiles and the river were lovely again.")
        };
        jsonl.push_str(&format!(
            "{{\"namespace\":\"alice\",\"session\":\"s{}\",\"turn\":{},\"role\":\"user\",\
             \"text\":\"{text}\",\"time\":\"2024-05-02T10:00:00+01:00\"}}\n",
            i / 50,
            i % 50
        ));
    }
    let parsed = parse_jsonl("inline", jsonl.as_bytes(), &IngestOptions::default()).unwrap();
    memory.append(&parsed).unwrap();
    memory
}

fn query(question: &str, budget: u32) -> CompileQuery {
    CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: question.to_owned(),
        as_of: None,
        budget: TokenBudget::new(budget),
    }
}

/// A request for a local reader (its own tokenizer) decoding up to `max_new_tokens` greedily.
fn greedy<'a>(
    query: &'a CompileQuery,
    config: &'a CompileConfig,
    max_new_tokens: u32,
) -> AnswerRequest<'a> {
    AnswerRequest {
        query,
        config,
        query_vectors: &[],
        tokenizer: None,
        question_date: None,
        decoding: DecodingSettings::greedy(max_new_tokens),
    }
}

#[test]
fn answers_with_the_budget_counted_in_the_readers_own_tokens() {
    let store = TestStore::new();
    let memory = memory_with(&store, 1);
    let config = CompileConfig::hybrid(10, DenseConfig::Off);
    let query = query("Where did I move in May?", 200);
    let request = greedy(&query, &config, 6);
    let report = memory.answer(&request, reader()).expect("answer");
    let own = Reader::tokenizer(reader()).expect("local readers have a tokenizer");
    assert_eq!(report.context.reader_tokenizer, evicortex::ReaderTokenizer::name(own.as_ref()));
    assert!(report.context.text.contains("I moved to Lisbon in May"), "{}", report.context.text);
    let answer = report.answer.as_ref().expect("the compiler did not abstain, the reader read");
    assert_eq!(&answer.reader, reader().identity());
    assert!(answer.generated_tokens >= 1 && answer.generated_tokens <= 6, "{answer:?}");
    // The whole prompt: the context plus instructions, question and chat template.
    assert!(answer.prompt_tokens > report.context.tokens_used + 40, "{answer:?}");
    assert_eq!(
        Some(answer.prompt_tokens),
        reader()
            .count_prompt(
                &evicortex_reader_prompt(&report.context.text, "Where did I move in May?").messages
            )
            .unwrap()
    );
    let json = report.to_json();
    assert_eq!(json["answer"]["reader"]["name"], TEST_READER, "{json}");
    assert_eq!(json["compiler_abstained"], false);
}

fn evicortex_reader_prompt(context: &str, question: &str) -> evicortex_reader::AnswerPrompt {
    evicortex_reader::build_answer_prompt(&evicortex_reader::AnswerRequest {
        question,
        context,
        question_date: None,
    })
}

#[test]
fn a_prompt_over_the_window_is_refused_with_the_numbers() {
    let window = reader().context_window().expect("local window");
    let store = TestStore::new();
    let memory = memory_with(&store, 400);
    let mut config = CompileConfig::hybrid(400, DenseConfig::Off);
    config.lexical.top_n = 400;
    // The budget alone, with the tokens to generate, already exceeds the window.
    let over = query("Lisbon trams tiles river", window);
    let request = greedy(&over, &config, 8);
    match memory.answer(&request, reader()) {
        Err(AnswerError::BudgetOverWindow { budget, max_new_tokens: 8, context_window }) => {
            assert_eq!((budget, context_window), (window, window));
        }
        other => panic!("expected BudgetOverWindow, got {other:?}"),
    }
    // The budget fits, but the context fills it and the instructions push the prompt over.
    let full = query("Lisbon trams tiles river", window - 8 - 10);
    let request = AnswerRequest { query: &full, ..request };
    let err = memory.answer(&request, reader()).expect_err("refused");
    match &err {
        AnswerError::Read(ReaderReadError::PromptTooLong {
            prompt_tokens,
            max_new_tokens: 8,
            context_window,
        }) => {
            assert_eq!(*context_window, window);
            assert!(prompt_tokens + 8 > window, "{err}");
        }
        other => panic!("expected PromptTooLong, got {other:?}"),
    }
    assert_eq!(err.field().as_deref(), Some("budget"));
    assert_eq!(err.class(), evicortex::ErrorClass::BadInput);
}

#[test]
fn the_compilers_abstention_is_returned_without_reading() {
    let store = TestStore::new();
    let memory = memory_with(&store, 1);
    let mut config = CompileConfig::hybrid(10, DenseConfig::Off);
    config.abstention.signal = SupportSignal::LexicalCoverage;
    config.abstention.threshold = Some(0.99);
    let query = query("What is the capital of Mongolia?", 200);
    let request = greedy(&query, &config, 6);
    let report = memory.answer(&request, reader()).expect("answer");
    assert!(report.context.abstain);
    assert!(report.answer.is_none());
    assert!(report.abstained());
}

#[test]
fn tokenizers_must_be_the_readers_own_or_named_for_an_endpoint() {
    let store = TestStore::new();
    let memory = memory_with(&store, 1);
    let config = CompileConfig::hybrid(10, DenseConfig::Off);
    let query = query("Where did I move?", 200);
    let o200k = TiktokenReader::o200k_base();
    let request = AnswerRequest { tokenizer: Some(&o200k), ..greedy(&query, &config, 4) };
    let err = memory.answer(&request, reader()).expect_err("conflict");
    assert!(matches!(err, AnswerError::TokenizerConflict { .. }), "{err}");
    // An endpoint (never contacted: the request is refused first) cannot count tokens.
    let endpoint = ChatCompletionsClient::new(ChatCompletionsConfig {
        base_url: "http://127.0.0.1:9/v1".to_owned(),
        model: "some-model".to_owned(),
        api_key: None,
        context_window: Some(8192),
        timeout: std::time::Duration::from_secs(5),
    })
    .unwrap();
    let request = AnswerRequest { tokenizer: None, ..request };
    let err = memory.answer(&request, &endpoint).expect_err("needs a tokenizer");
    assert!(matches!(err, AnswerError::TokenizerNeeded { .. }), "{err}");
    assert_eq!(err.field().as_deref(), Some("tokenizer"));
}
