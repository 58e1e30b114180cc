//! What every door (the CLI, HTTP, MCP, Python) compiles with when a request sets nothing, a
//! question request made ready to compile or answer, and the catch-up a door without the
//! background embedder runs before it compiles: written once here, so that the same question on
//! the same store compiles the same context at each door.

use evicortex_compiler::{CompileConfig, CompileQuery, DenseConfig, ReaderTokenizer};
use evicortex_core::{EventTime, Namespace, TokenBudget};
use serde_json::{Map, Value};

use crate::{
    AnswerRequest, CatchUpError, CatchUpLimits, CompileOptionsError, CompileRequest,
    DecodingSettings, EmbedProgress, EmbedReport, FieldError, Memory,
    compile_options::apply_compile_options,
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

/// A question as a door receives it (an HTTP or MCP body, Python's arguments), before the
/// memory's default configuration applies.
#[derive(Debug, Clone)]
pub struct QuestionRequest<'a> {
    /// Only this namespace's turns are read.
    pub namespace: Namespace,
    /// The question, verbatim.
    pub question: String,
    /// Only evidence said at or before this time; `None` admits every time.
    pub as_of: Option<EventTime>,
    /// The context's budget in the reader's tokens.
    pub budget: u32,
    /// Configuration fields applied over [`Memory::default_config`] (an HTTP request's
    /// `options`, Python's settings); `None` compiles the default.
    pub options: Option<&'a Map<String, Value>>,
}

/// A question ready to compile or answer: what is asked and the configuration it compiles with.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedQuestion {
    /// Namespace, question, as-of time and budget.
    pub query: CompileQuery,
    /// The memory's default with the request's options applied.
    pub config: CompileConfig,
}

impl PreparedQuestion {
    /// The compile of this question, its budget counted in `reader`'s tokens.
    pub fn compile_request<'a>(&'a self, reader: &'a dyn ReaderTokenizer) -> CompileRequest<'a> {
        CompileRequest { query: &self.query, config: &self.config, reader, query_vectors: &[] }
    }

    /// The answer to this question, decoded by `decoding`; `tokenizer` counts the budget for a
    /// reader without a tokenizer of its own (a remote endpoint), `None` for a local reader.
    pub fn answer_request<'a>(
        &'a self,
        tokenizer: Option<&'a dyn ReaderTokenizer>,
        decoding: DecodingSettings,
    ) -> AnswerRequest<'a> {
        AnswerRequest {
            query: &self.query,
            config: &self.config,
            query_vectors: &[],
            tokenizer,
            question_date: None,
            decoding,
        }
    }
}

impl Memory {
    /// `request` made ready to compile or answer: its query, and [`Memory::default_config`]
    /// with its options applied (a bad option refused by its path, as
    /// [`Memory::config_with_options`]).
    pub fn prepare_question(
        &self,
        request: QuestionRequest<'_>,
    ) -> Result<PreparedQuestion, CompileOptionsError> {
        let config = match request.options {
            None => self.default_config(),
            Some(options) => self.config_with_options(options)?,
        };
        let query = CompileQuery {
            namespace: request.namespace,
            question: request.question,
            as_of: request.as_of,
            budget: TokenBudget::new(request.budget),
        };
        Ok(PreparedQuestion { query, config })
    }

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

    #[test]
    fn a_question_request_compiles_its_options_over_the_default_and_names_a_bad_one() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::open(dir.path()).unwrap();
        let namespace = Namespace::new("alice").unwrap();
        let as_of = EventTime::parse_rfc3339("2024-05-01T10:00:00Z").unwrap();
        let request = |options| QuestionRequest {
            namespace: namespace.clone(),
            question: "where did I park?".to_owned(),
            as_of: Some(as_of),
            budget: 300,
            options,
        };
        let plain = memory.prepare_question(request(None)).unwrap();
        let query = CompileQuery {
            namespace: namespace.clone(),
            question: "where did I park?".to_owned(),
            as_of: Some(as_of),
            budget: TokenBudget::new(300),
        };
        assert_eq!(plain, PreparedQuestion { query, config: memory.default_config() });
        let options = serde_json::json!({"rrf_k": 5.0});
        let tuned = memory.prepare_question(request(options.as_object())).unwrap();
        assert_eq!(tuned.config, CompileConfig { rrf_k: 5.0, ..memory.default_config() });
        assert_eq!(tuned.query, plain.query);
        let bad = serde_json::json!({"rrf_k": "five"});
        let err = memory.prepare_question(request(bad.as_object())).unwrap_err();
        assert_eq!(err.field().as_deref(), Some("rrf_k"));
    }
}
