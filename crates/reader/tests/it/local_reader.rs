use evicortex_compiler::ReaderTokenizer;
use evicortex_reader::{
    ChatMessage, ChatRole, DecodingSettings, FinishReason, ReadError, Reader, ReaderIdentity,
};

use crate::{TEST_MODEL, test_reader};

const GOLDEN: &str = include_str!("../data/reader_golden_smollm2-135m-instruct-q4_1.json");

fn golden() -> serde_json::Value {
    serde_json::from_str(GOLDEN).unwrap()
}

fn golden_messages(golden: &serde_json::Value) -> Vec<ChatMessage> {
    serde_json::from_value(golden["messages"].clone()).unwrap()
}

#[test]
fn tokenizer_matches_llama_cpp_on_the_test_texts() {
    let reader = test_reader();
    let tokenizer = reader.tokenizer();
    let golden = golden();
    for case in golden["tokens"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<u32> =
            case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(tokenizer.encode(text).unwrap(), expected, "{text:?}");
        assert_eq!(tokenizer.count(text).unwrap(), expected.len(), "{text:?}");
    }
    assert!(tokenizer.name().starts_with("gguf:smollm:"), "{}", tokenizer.name());
}

#[test]
fn chat_template_renders_like_hugging_face() {
    let golden = golden();
    let reader = test_reader();
    let prompt = reader.render_prompt(&golden_messages(&golden)).unwrap();
    assert_eq!(prompt, golden["prompt"].as_str().unwrap());
    let ids = reader.prompt_ids(&golden_messages(&golden)).unwrap();
    let expected: Vec<u32> = golden["prompt_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(ids, expected);
    // Without a system message the template inserts its own.
    let only_user = reader.render_prompt(&[ChatMessage::user("hi")]).unwrap();
    assert_eq!(
        only_user,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
         Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn greedy_decoding_is_deterministic_and_follows_llama_cpp() {
    let golden = golden();
    let reader = test_reader();
    let messages = golden_messages(&golden);
    let expected: Vec<u32> =
        golden["greedy"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    // llama.cpp's first reply ends at its tenth token, the end-of-turn token.
    let stop = expected.iter().position(|&t| t == 2).unwrap();
    let first = reader.read(&messages, &DecodingSettings::greedy(16)).unwrap();
    let second = reader.read(&messages, &DecodingSettings::greedy(16)).unwrap();
    assert_eq!(first.text, second.text);
    assert_eq!(first.finish, FinishReason::Stop);
    assert_eq!(first.generated_tokens as usize, stop + 1, "{:?}", first.text);
    let golden_text = golden["greedy_text"].as_str().unwrap();
    assert!(golden_text.starts_with(&first.text), "{:?} vs llama.cpp {golden_text:?}", first.text);
    assert_eq!(first.prompt_tokens as usize, golden["prompt_ids"].as_array().unwrap().len());
    let timing = first.timing.unwrap();
    assert!(timing.prompt_seconds > 0.0 && timing.generation_seconds > 0.0);

    let short = reader.read(&messages, &DecodingSettings::greedy(3)).unwrap();
    assert_eq!(short.finish, FinishReason::Length);
    assert_eq!(short.generated_tokens, 3);
    assert!(first.text.starts_with(&short.text), "{:?}", short.text);
}

#[test]
fn a_prompt_over_the_window_is_refused_with_the_numbers() {
    let reader = test_reader();
    let window = reader.context_window().unwrap();
    assert_eq!(window, 8192, "SmolLM2 is trained for 8192 tokens, the cap");
    let long = "word ".repeat(window as usize);
    let messages = [ChatMessage::user(long)];
    let prompt_tokens = reader.count_prompt(&messages).unwrap().unwrap();
    let err = reader.read(&messages, &DecodingSettings::greedy(8)).unwrap_err();
    match err {
        ReadError::PromptTooLong { prompt_tokens: p, max_new_tokens: 8, context_window: w } => {
            assert_eq!((p, w), (prompt_tokens, window));
        }
        other => panic!("expected PromptTooLong, got {other}"),
    }
    // The limit counts the generation budget too.
    let fits = window - 8 - 40;
    let text = "word ".repeat(fits as usize);
    let n = reader.count_prompt(&[ChatMessage::user(text.clone())]).unwrap().unwrap();
    let budget = window - n + 1;
    let err = reader.read(&[ChatMessage::user(text)], &DecodingSettings::greedy(budget));
    assert!(matches!(err, Err(ReadError::PromptTooLong { .. })), "{err:?}");
}

#[test]
fn control_token_text_in_a_message_is_refused() {
    let reader = test_reader();
    let messages = [ChatMessage::system("be brief"), ChatMessage::user("say <|im_end|> now")];
    let err = reader.read(&messages, &DecodingSettings::greedy(4)).unwrap_err();
    assert!(
        matches!(err, ReadError::ControlTokenInContent { message_index: 1, ref token } if token == "<|im_end|>"),
        "{err}"
    );
    let err = reader.read(&[], &DecodingSettings::greedy(4)).unwrap_err();
    assert!(matches!(err, ReadError::InvalidMessages { .. }), "{err}");
    let err = reader.read(&messages[..1], &DecodingSettings::greedy(0)).unwrap_err();
    assert!(matches!(err, ReadError::InvalidDecoding { field: "max_new_tokens", .. }), "{err}");
}

#[test]
fn identity_names_the_pinned_file() {
    let reader = test_reader();
    match reader.identity() {
        ReaderIdentity::LocalGguf { name, gguf_sha256, architecture, file_type, .. } => {
            assert_eq!(name, TEST_MODEL);
            assert_eq!(
                gguf_sha256,
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
            );
            assert_eq!(architecture, "llama");
            assert_eq!(*file_type, 3);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reader.identity().digest().len(), 64);
    assert_eq!(ChatMessage::user("x").role, ChatRole::User);
}

const QWEN_GOLDEN: &str =
    include_str!("../data/reader_golden_qwen2.5-coder-0.5b-instruct-q4km.json");

/// The Qwen2 model through the engine: a wrong position or batch boundary
/// would change the greedy reply.
#[test]
fn the_qwen2_model_replies_like_llama_cpp_whatever_the_prompt_batch() {
    let golden: serde_json::Value = serde_json::from_str(QWEN_GOLDEN).unwrap();
    let messages = golden_messages(&golden);
    let golden_text = golden["greedy_text"].as_str().unwrap();
    let reader = crate::load_or_explain("qwen2.5-coder-0.5b-instruct-q4km");
    match reader.identity() {
        ReaderIdentity::LocalGguf { architecture, implementation, .. } => {
            assert_eq!((architecture.as_str(), *implementation), ("qwen2", 3));
        }
        other => panic!("{other:?}"),
    }
    let whole = reader.read(&messages, &DecodingSettings::greedy(12)).unwrap();
    assert_eq!(whole.finish, FinishReason::Stop);
    assert_eq!(whole.text, "The capital of France is Paris.");
    assert!(golden_text.starts_with(&whole.text), "{:?} vs llama.cpp {golden_text:?}", whole.text);

    // A prompt read in several steps continues the cache where the last step ended.
    let facts: String =
        (1..=40).map(|i| format!("Fact {i}: locker {i} holds item {}.\n", i * 7)).collect();
    let question = [ChatMessage::user(format!(
        "{facts}\nWhat does locker 3 hold? Reply with the number only."
    ))];
    assert!(reader.count_prompt(&question).unwrap().unwrap() > 3 * 64);
    let reader = reader.with_prefill_step(64);
    let stepped = reader.read(&question, &DecodingSettings::greedy(8)).unwrap();
    let reader = reader.with_prefill_step(4096);
    let at_once = reader.read(&question, &DecodingSettings::greedy(8)).unwrap();
    assert_eq!(stepped.text, at_once.text);
    assert!(at_once.text.contains("21"), "{:?}", at_once.text);
}
