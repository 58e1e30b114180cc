//! How the servers compile: the memory's default configuration with a request's partial
//! `options` applied over it, and the reader tokenizers a request may name.

use std::sync::Arc;

use evicortex::front_end::{PreparedQuestion, QuestionRequest, ReaderTokenizers};
use evicortex::{CompiledContext, EventTime, Memory, Namespace, ReaderTokenizer};

use crate::dto::CompileRequest;
use crate::{ApiError, facade_error};

/// Reader tokenizers a request may name. Paths to tokenizer files are not accepted from
/// requests: a client must not make the server open files.
pub const READER_TOKENIZERS: [&str; 2] = ["o200k_base", "cl100k_base"];

/// A request's question made ready to compile: the memory's default configuration with the
/// request's `options` applied over it; a bad option is a 422 naming `options.<field>`.
pub fn prepared_question(
    memory: &Memory,
    namespace: &Namespace,
    question: String,
    as_of: Option<EventTime>,
    budget: u32,
    options: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<PreparedQuestion, ApiError> {
    let request =
        QuestionRequest { namespace: namespace.clone(), question, as_of, budget, options };
    memory.prepare_question(request).map_err(|e| {
        let field = e.field().map_or("options".to_owned(), |f| format!("options.{f}"));
        ApiError::invalid(field, e)
    })
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
    let CompileRequest { query, budget, as_of, options, .. } = request;
    let question = prepared_question(memory, namespace, query, as_of, budget, options.as_ref())?;
    memory.compile(&question.compile_request(reader.as_ref())).map_err(|e| facade_error(&e))
}
