//! Checks a GGUF file's metadata against the values its manifest pins, before any tensor is
//! read: a file with the pinned digest but unexpected metadata cannot exist, but the check also
//! guards the manifest itself (a wrong architecture or pre-tokenizer would load as garbage).

use std::path::Path;

use candle_core::quantized::gguf_file;
use evicortex_embed::Sha256Digest;

use crate::{error::ReaderModelError, gguf_manifest::GgufExpectations};

/// What the reader takes from the metadata besides the checked values.
#[derive(Debug)]
pub(crate) struct GgufMetadata {
    /// `tokenizer.chat_template`.
    pub chat_template: String,
    /// `tokenizer.ggml.bos_token_id`, if present.
    pub bos_token_id: Option<u32>,
}

/// Compares `content`'s metadata with `expect`.
pub(crate) fn check(
    path: &Path,
    content: &gguf_file::Content,
    expect: &GgufExpectations,
) -> Result<GgufMetadata, ReaderModelError> {
    let bad = |key: &str, reason: String| ReaderModelError::BadGguf {
        path: path.to_owned(),
        reason: format!("{key}: {reason}"),
    };
    let value = |key: &str| content.metadata.get(key).ok_or_else(|| bad(key, "missing".into()));
    let string = |key: &str| -> Result<String, ReaderModelError> {
        value(key)?.to_string().cloned().map_err(|e| bad(key, e.to_string()))
    };
    let number = |key: &str| -> Result<u32, ReaderModelError> {
        value(key)?.to_u32().map_err(|e| bad(key, e.to_string()))
    };
    let same = |key: &str, expected: String, found: String| {
        if expected == found {
            Ok(())
        } else {
            Err(ReaderModelError::MetadataMismatch {
                path: path.to_owned(),
                key: key.to_owned(),
                expected,
                found,
            })
        }
    };
    let arch = string("general.architecture")?;
    same("general.architecture", expect.architecture.clone(), arch.clone())?;
    same("general.name", expect.general_name.clone(), string("general.name")?)?;
    same(
        "general.file_type",
        expect.file_type.to_string(),
        number("general.file_type")?.to_string(),
    )?;
    for (key, expected) in [
        (format!("{arch}.block_count"), expect.block_count),
        (format!("{arch}.embedding_length"), expect.embedding_length),
        (format!("{arch}.context_length"), expect.context_length),
    ] {
        same(&key, expected.to_string(), number(&key)?.to_string())?;
    }
    let tokens = value("tokenizer.ggml.tokens")?
        .to_vec()
        .map_err(|e| bad("tokenizer.ggml.tokens", e.to_string()))?
        .len();
    same("tokenizer.ggml.tokens (count)", expect.vocab_size.to_string(), tokens.to_string())?;
    same("tokenizer.ggml.model", expect.tokenizer_model.clone(), string("tokenizer.ggml.model")?)?;
    same("tokenizer.ggml.pre", expect.tokenizer_pre.clone(), string("tokenizer.ggml.pre")?)?;
    let chat_template = string("tokenizer.chat_template")?;
    same(
        "tokenizer.chat_template (sha256)",
        expect.chat_template_sha256.to_hex(),
        Sha256Digest::of(chat_template.as_bytes()).to_hex(),
    )?;
    let bos_token_id = match content.metadata.get("tokenizer.ggml.bos_token_id") {
        Some(v) => Some(v.to_u32().map_err(|e| bad("tokenizer.ggml.bos_token_id", e.to_string()))?),
        None => None,
    };
    Ok(GgufMetadata { chat_template, bos_token_id })
}
