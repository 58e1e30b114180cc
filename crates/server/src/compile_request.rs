//! How the servers compile: the memory's default configuration with a request's partial
//! `options` applied over it, and the reader tokenizers a request may name.

use std::sync::Arc;

use evicortex::front_end::ReaderTokenizers;
use evicortex::{
    CompileConfig, CompileQuery, CompileRequest as MemoryCompileRequest, CompiledContext, Memory,
    Namespace, ReaderTokenizer, TokenBudget,
};

use crate::dto::CompileRequest;
use crate::{ApiError, facade_error};

/// Reader tokenizers a request may name. Paths to tokenizer files are not accepted from
/// requests: a client must not make the server open files.
pub const READER_TOKENIZERS: [&str; 2] = ["o200k_base", "cl100k_base"];

/// The memory's default configuration with a request's `options` applied over it; a bad option
/// is a 422 naming `options.<field>`.
pub fn requested_config(
    memory: &Memory,
    options: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<CompileConfig, ApiError> {
    match options {
        None => Ok(memory.default_config()),
        Some(options) => memory.config_with_options(options).map_err(|e| {
            let field = e.field().map_or("options".to_owned(), |f| format!("options.{f}"));
            ApiError::invalid(field, e)
        }),
    }
}

/// The reader tokenizers loaded so far (at most [`READER_TOKENIZERS`]).
#[derive(Debug, Default)]
pub struct Readers(ReaderTokenizers);

impl Readers {
    fn get(&self, name: &str) -> Result<Arc<dyn ReaderTokenizer>, ApiError> {
        if !READER_TOKENIZERS.contains(&name) {
            return Err(ApiError::invalid(
                "reader_tokenizer",
                format!(
                    "unknown reader tokenizer {name:?}; this server accepts {}",
                    READER_TOKENIZERS.join(", ")
                ),
            ));
        }
        self.0
            .get(name)
            .map_err(|e| ApiError::Unavailable { message: format!("reader tokenizer {name}: {e}") })
    }
}

/// Compiles `request` over `namespace`.
pub fn compile(
    memory: &Memory,
    readers: &Readers,
    namespace: &Namespace,
    request: CompileRequest,
) -> Result<CompiledContext, ApiError> {
    let reader = readers.get(&request.reader_tokenizer)?;
    let config = requested_config(memory, request.options.as_ref())?;
    let query = CompileQuery {
        namespace: namespace.clone(),
        question: request.query,
        as_of: request.as_of,
        budget: TokenBudget::new(request.budget),
    };
    let compile_request = MemoryCompileRequest {
        query: &query,
        config: &config,
        reader: reader.as_ref(),
        query_vectors: &[],
    };
    memory.compile(&compile_request).map_err(|e| facade_error(&e))
}
