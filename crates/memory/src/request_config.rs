//! What every door (the CLI, HTTP, MCP, Python) compiles with when a request sets nothing, and
//! the catch-up a door without the background embedder runs before it compiles: written once
//! here, so that the same question on the same store compiles the same context at each door.

use evicortex_compiler::{CompileConfig, DenseConfig};
use evicortex_core::Namespace;
use serde_json::{Map, Value};

use crate::{
    CatchUpError, CatchUpLimits, CompileOptionsError, DecodingSettings, EmbedProgress, EmbedReport,
    FieldError, Memory, compile_options::apply_compile_options,
};

/// Most tokens an answer request may ask the reader to generate.
pub const MAX_NEW_TOKENS_LIMIT: u32 = 512;

/// Tokens an answer request's reader generates when the request does not say.
pub const DEFAULT_MAX_NEW_TOKENS: u32 = 64;

/// Greedy decoding of `max_new_tokens` ([`DEFAULT_MAX_NEW_TOKENS`] when not given), refused
/// outside 1 to [`MAX_NEW_TOKENS_LIMIT`] naming `max_new_tokens`.
pub fn requested_decoding(max_new_tokens: Option<u32>) -> Result<DecodingSettings, FieldError> {
    let max_new_tokens = max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS);
    if max_new_tokens == 0 || max_new_tokens > MAX_NEW_TOKENS_LIMIT {
        return Err(FieldError {
            field: "max_new_tokens".to_owned(),
            reason: format!("must be between 1 and {MAX_NEW_TOKENS_LIMIT}, got {max_new_tokens}"),
        });
    }
    Ok(DecodingSettings::greedy(max_new_tokens))
}

impl Memory {
    /// The configuration of a compile that sets nothing: the committed default
    /// ([`CompileConfig::default_for`]), with dense retrieval when this memory has an encoder.
    pub fn default_config(&self) -> CompileConfig {
        CompileConfig::default_for(self.has_encoder())
    }

    /// [`Memory::default_config`] with `options` (fields of a configuration, objects merged
    /// field by field, as an HTTP request's `options`) applied over it; an unknown field, a
    /// value of the wrong shape or out of range is refused by its path.
    pub fn config_with_options(
        &self,
        options: &Map<String, Value>,
    ) -> Result<CompileConfig, CompileOptionsError> {
        apply_compile_options(&self.default_config(), options)
    }

    /// Embeds the turns of `namespace` with no vector yet when a compile under `config` reads
    /// vectors (dense retrieval on, and this memory has an encoder), so that every turn is a
    /// dense candidate of the compile that follows; `None` when it reads none.
    pub fn catch_up_for_compile(
        &self,
        namespace: &Namespace,
        config: &CompileConfig,
        progress: &mut dyn FnMut(&EmbedProgress),
    ) -> Result<Option<EmbedReport>, CatchUpError> {
        if !self.has_encoder() || config.dense == DenseConfig::Off {
            return Ok(None);
        }
        self.catch_up(Some(namespace), CatchUpLimits::default(), progress).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_without_an_encoder_compiles_the_lexical_default_and_needs_no_catch_up() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::open(dir.path()).unwrap();
        assert_eq!(memory.default_config(), CompileConfig::default_for(false));
        let options = serde_json::json!({"rrf_k": 5.0});
        let tuned = memory.config_with_options(options.as_object().unwrap()).unwrap();
        assert_eq!(tuned, CompileConfig { rrf_k: 5.0, ..CompileConfig::default_for(false) });
        let namespace = Namespace::new("alice").unwrap();
        let dense = CompileConfig::default_for(true);
        assert!(memory.catch_up_for_compile(&namespace, &dense, &mut |_| {}).unwrap().is_none());
    }
}
