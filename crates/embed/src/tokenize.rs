//! Tokenisation with the artifact's `tokenizer.json`, its own truncation and padding switched off,
//! and the overlength policy applied to the measured length before the model ever runs.

use std::ops::Range;

use tokenizers::Tokenizer;

use crate::{
    encoder_config::Overlength,
    error::{ArtifactError, EmbedError},
};

/// The artifact tokenizer with truncation and padding disabled.
#[derive(Debug)]
pub struct EncoderTokenizer {
    tokenizer: Tokenizer,
    cls: u32,
    sep: u32,
}

/// One sequence the model will see: a whole text, or one window (or the truncated head) of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInput {
    /// Index of the text in the request.
    pub text_index: usize,
    /// Token ids with the special tokens.
    pub token_ids: Vec<u32>,
    /// Range of the text's content tokens (special tokens excluded) this sequence covers.
    pub content_tokens: Range<usize>,
}

impl EncoderTokenizer {
    /// Loads `tokenizer.json` bytes and switches off its truncation and padding: the artifact's
    /// file says truncate and pad to 128, but the encoder's maximum length is set explicitly.
    pub fn load(bytes: &[u8]) -> Result<EncoderTokenizer, ArtifactError> {
        let invalid = |field: &str, reason: String| ArtifactError::InvalidConfig {
            file: "tokenizer.json".to_owned(),
            field: field.to_owned(),
            reason,
        };
        let mut tokenizer =
            Tokenizer::from_bytes(bytes).map_err(|err| invalid("json", err.to_string()))?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|err| invalid("truncation", err.to_string()))?;
        let empty =
            tokenizer.encode("", true).map_err(|err| invalid("post_processor", err.to_string()))?;
        let &[cls, sep] = empty.get_ids() else {
            return Err(invalid(
                "post_processor",
                format!("an empty text should give [CLS] [SEP], got ids {:?}", empty.get_ids()),
            ));
        };
        Ok(EncoderTokenizer { tokenizer, cls, sep })
    }

    /// Token ids of each text, special tokens included, without any truncation.
    pub fn encode_all(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let _span = tracing::debug_span!("tokenize", n_texts = texts.len()).entered();
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        match self.tokenizer.encode_batch(inputs, true) {
            Ok(encodings) => Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect()),
            Err(_) => {
                // Find which text failed, to name it.
                for (text_index, text) in texts.iter().enumerate() {
                    if let Err(err) = self.tokenizer.encode(text.as_str(), true) {
                        return Err(EmbedError::Tokenizer { text_index, reason: err.to_string() });
                    }
                }
                Err(EmbedError::Tokenizer {
                    text_index: 0,
                    reason: "batch encoding failed".to_owned(),
                })
            }
        }
    }

    /// Applies `policy` to one text's ids: the sequences the model will see.
    pub fn model_inputs(
        &self,
        text_index: usize,
        token_ids: Vec<u32>,
        max_tokens: usize,
        policy: Overlength,
    ) -> Result<Vec<ModelInput>, EmbedError> {
        let n_content = token_ids.len().saturating_sub(2);
        if token_ids.len() <= max_tokens {
            return Ok(vec![ModelInput { text_index, token_ids, content_tokens: 0..n_content }]);
        }
        let content = &token_ids[1..token_ids.len() - 1];
        let width = max_tokens - 2;
        let wrap = |range: Range<usize>| {
            let mut ids = Vec::with_capacity(range.len() + 2);
            ids.push(self.cls);
            ids.extend_from_slice(&content[range.clone()]);
            ids.push(self.sep);
            ModelInput { text_index, token_ids: ids, content_tokens: range }
        };
        match policy {
            Overlength::Refuse => {
                Err(EmbedError::Overlength { text_index, tokens: token_ids.len(), max_tokens })
            }
            Overlength::Truncate => Ok(vec![wrap(0..width)]),
            Overlength::Window { overlap_tokens } => {
                let step = width - overlap_tokens;
                let mut windows = Vec::new();
                let mut start = 0;
                loop {
                    let end = (start + width).min(n_content);
                    windows.push(wrap(start..end));
                    if end == n_content {
                        break;
                    }
                    start += step;
                }
                Ok(windows)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> EncoderTokenizer {
        // A tiny real WordPiece tokenizer built in the test, with the same post-processor shape
        // as MiniLM's and its own truncation at 4 that must be switched off.
        let json = r###"{
          "version": "1.0",
          "truncation": {"max_length": 4, "strategy": "LongestFirst", "stride": 0, "direction": "Right"},
          "padding": {"strategy": {"Fixed": 4}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
          "added_tokens": [],
          "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}},
          "decoder": null,
          "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3, "a": 4, "b": 5, "c": 6, "d": 7, "e": 8}}
        }"###;
        EncoderTokenizer::load(json.as_bytes()).unwrap()
    }

    fn ids(t: &EncoderTokenizer, text: &str) -> Vec<u32> {
        t.encode_all(&[text.to_owned()]).unwrap().remove(0)
    }

    #[test]
    fn the_tokenizer_files_own_truncation_and_padding_are_overridden() {
        let t = tokenizer();
        assert_eq!(ids(&t, "a b c d e"), vec![1, 4, 5, 6, 7, 8, 2]);
        assert_eq!(ids(&t, "a"), vec![1, 4, 2]);
    }

    #[test]
    fn overlength_is_refused_with_its_token_count() {
        let t = tokenizer();
        let err = t.model_inputs(3, ids(&t, "a b c d e"), 5, Overlength::Refuse).unwrap_err();
        assert!(
            matches!(err, EmbedError::Overlength { text_index: 3, tokens: 7, max_tokens: 5 }),
            "{err}"
        );
        assert_eq!(t.model_inputs(0, ids(&t, "a b c"), 5, Overlength::Refuse).unwrap().len(), 1);
    }

    #[test]
    fn truncate_keeps_the_head_and_window_covers_every_token() {
        let t = tokenizer();
        let head = t.model_inputs(0, ids(&t, "a b c d e"), 5, Overlength::Truncate).unwrap();
        assert_eq!(
            head,
            vec![ModelInput {
                text_index: 0,
                token_ids: vec![1, 4, 5, 6, 2],
                content_tokens: 0..3
            }]
        );

        let windows = t
            .model_inputs(0, ids(&t, "a b c d e"), 5, Overlength::Window { overlap_tokens: 1 })
            .unwrap();
        let got: Vec<_> =
            windows.iter().map(|w| (w.token_ids.clone(), w.content_tokens.clone())).collect();
        assert_eq!(got, vec![(vec![1, 4, 5, 6, 2], 0..3), (vec![1, 6, 7, 8, 2], 2..5)]);
    }
}
