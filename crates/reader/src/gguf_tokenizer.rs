//! The reader model's own tokenizer, rebuilt from its GGUF metadata: the byte-level BPE
//! vocabulary and merges the file carries, the added (control and user-defined) tokens, and the
//! normaliser and pre-tokenizer that `tokenizer.ggml.pre` names, as the model authors'
//! `tokenizer.json` defines them. Only pre-tokenizers written out here are accepted; any other
//! value of `tokenizer.ggml.pre` is refused rather than approximated.

use std::{collections::BTreeSet, sync::Arc};

use candle_core::quantized::gguf_file;
use evicortex_compiler::{ReaderTokenizer, ReaderTokenizerError};
use serde_json::json;

/// GGUF `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// A GGUF model's tokenizer.
#[derive(Clone)]
pub struct GgufTokenizer {
    name: String,
    tokenizer: Arc<tokenizers::Tokenizer>,
    added_tokens: Vec<AddedToken>,
    eos_token_id: u32,
}

/// A token the tokenizer matches as a whole in text (`<|im_start|>`), outside BPE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    /// Its id.
    pub id: u32,
    /// Its text.
    pub text: String,
    /// A control token (end of turn, start of turn...), as opposed to a user-defined one
    /// (`<tool_call>`).
    pub control: bool,
}

/// The pre-tokenizers this crate knows, by `tokenizer.ggml.pre`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum PreTokenizer {
    /// Qwen2 / Qwen2.5: NFC, then the Qwen2 split regex (single digits, case-insensitive
    /// contractions), then byte-level without its own regex.
    Qwen2,
    /// SmolLM / SmolLM2 (StarCoder's): single digits, then GPT-2's byte-level regex.
    Smollm,
}

impl PreTokenizer {
    fn parse(pre: &str) -> Option<PreTokenizer> {
        match pre {
            "qwen2" => Some(PreTokenizer::Qwen2),
            "smollm" => Some(PreTokenizer::Smollm),
            _ => None,
        }
    }

    /// `normalizer`, `pre_tokenizer` and `decoder` of the model's `tokenizer.json`.
    fn components(self) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
        match self {
            PreTokenizer::Qwen2 => (
                json!({"type": "NFC"}),
                json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated",
                     "invert": false},
                    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                     "use_regex": false}
                ]}),
                json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                       "use_regex": false}),
            ),
            PreTokenizer::Smollm => (
                serde_json::Value::Null,
                json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Digits", "individual_digits": true},
                    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                     "use_regex": true}
                ]}),
                json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                       "use_regex": true}),
            ),
        }
    }
}

const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Why the tokenizer could not be built; the caller adds the file's path.
pub(crate) type BuildError = String;

impl GgufTokenizer {
    /// Builds the tokenizer from `content`'s metadata.
    pub(crate) fn from_gguf(
        content: &gguf_file::Content,
        identity_digest: &str,
    ) -> Result<GgufTokenizer, BuildError> {
        let md = |key: &str| content.metadata.get(key).ok_or_else(|| format!("{key} is missing"));
        let string = |key: &str| -> Result<String, BuildError> {
            md(key)?.to_string().cloned().map_err(|e| format!("{key}: {e}"))
        };
        let model = string("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(format!("tokenizer.ggml.model {model:?} (only byte-level BPE, gpt2)"));
        }
        let pre_name = string("tokenizer.ggml.pre")?;
        let pre = PreTokenizer::parse(&pre_name)
            .ok_or_else(|| format!("tokenizer.ggml.pre {pre_name:?} has no known definition"))?;
        let tokens: Vec<String> = md("tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("tokenizer.ggml.tokens: {e}")))
            .collect::<Result<_, _>>()?;
        let types: Vec<i32> = md("tokenizer.ggml.token_type")?
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_i32().map_err(|e| format!("tokenizer.ggml.token_type: {e}")))
            .collect::<Result<_, _>>()?;
        let merges: Vec<String> = md("tokenizer.ggml.merges")?
            .to_vec()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("tokenizer.ggml.merges: {e}")))
            .collect::<Result<_, _>>()?;
        if types.len() != tokens.len() {
            return Err(format!("{} token types for {} tokens", types.len(), tokens.len()));
        }
        let eos_token_id = md("tokenizer.ggml.eos_token_id")?
            .to_u32()
            .map_err(|e| format!("tokenizer.ggml.eos_token_id: {e}"))?;
        if eos_token_id as usize >= tokens.len() {
            return Err(format!("tokenizer.ggml.eos_token_id {eos_token_id} is out of range"));
        }
        if let Ok(value) = md("tokenizer.ggml.add_bos_token")
            && value.to_bool().map_err(|e| e.to_string())?
        {
            return Err(
                "tokenizer.ggml.add_bos_token is true (a BOS prefix is not implemented)".to_owned()
            );
        }

        let mut vocab = serde_json::Map::with_capacity(tokens.len());
        let mut seen = BTreeSet::new();
        for (id, token) in tokens.iter().enumerate() {
            if !seen.insert(token.as_str()) {
                return Err(format!("token {id} {token:?} appears twice in the vocabulary"));
            }
            vocab.insert(token.clone(), json!(id));
        }
        let mut added = Vec::new();
        let mut added_tokens = Vec::new();
        for (id, (token, &kind)) in tokens.iter().zip(&types).enumerate() {
            if kind == TOKEN_TYPE_CONTROL || kind == TOKEN_TYPE_USER_DEFINED {
                let special = kind == TOKEN_TYPE_CONTROL;
                added.push(json!({
                    "id": id, "content": token, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": special
                }));
                added_tokens.push(AddedToken {
                    id: id as u32,
                    text: token.clone(),
                    control: special,
                });
            }
        }
        let (normalizer, pre_tokenizer, decoder) = pre.components();
        let definition = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": decoder,
            "model": {
                "type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": vocab, "merges": merges
            }
        });
        let bytes = serde_json::to_vec(&definition).map_err(|e| e.to_string())?;
        let tokenizer = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| e.to_string())?;
        if tokenizer.get_vocab_size(true) != tokens.len() {
            return Err(format!(
                "the rebuilt vocabulary has {} entries, the GGUF {}",
                tokenizer.get_vocab_size(true),
                tokens.len()
            ));
        }
        Ok(GgufTokenizer {
            name: format!("gguf:{pre_name}:{}", &identity_digest[..32.min(identity_digest.len())]),
            tokenizer: Arc::new(tokenizer),
            added_tokens,
            eos_token_id,
        })
    }

    /// Token ids of `text`; the text of an added token (such as `<|im_start|>`) becomes that
    /// token, as in the model's own tokenizer. No BOS or other token is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer.encode(text, false).map(|e| e.get_ids().to_vec()).map_err(|e| e.to_string())
    }

    /// The text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.tokenizer.decode(ids, true).map_err(|e| e.to_string())
    }

    /// The end-of-sequence token.
    pub fn eos_token_id(&self) -> u32 {
        self.eos_token_id
    }

    /// The control and user-defined tokens.
    pub fn added_tokens(&self) -> &[AddedToken] {
        &self.added_tokens
    }

    /// The text of token `id`, if it exists.
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer").field("name", &self.name).finish()
    }
}

impl ReaderTokenizer for GgufTokenizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError> {
        self.encode(text)
            .map(|ids| ids.len())
            .map_err(|reason| ReaderTokenizerError::Encode { name: self.name.clone(), reason })
    }

    fn shared(&self) -> Option<Arc<dyn ReaderTokenizer>> {
        Some(Arc::new(self.clone()))
    }
}
