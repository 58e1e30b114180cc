//! `Memory::answer`: compile a cited context for a question with the budget counted in the
//! reader's own tokenizer, let the reader read it, and return its answer with the records it
//! cited, or the abstention (the compiler's, when nothing supports the question, or the
//! reader's, when the context does not answer it).
//!
//! The reader's full prompt (instructions, question, context, chat template) is counted before
//! anything is generated; a prompt over the reader's window is refused with the numbers, never
//! truncated. When the compiler abstains the reader is not asked: there is no evidence to read.

use std::sync::Arc;

use evicortex_compiler::{CompileConfig, CompileQuery, CompiledContext, ReaderTokenizer};
use evicortex_embed::IdentifiedVector;
use evicortex_reader::{
    Answer, AnswerRequest as PromptRequest, DecodingSettings, ReadError, Reader,
    build_answer_prompt,
};

use crate::{CompileError, CompileReport, CompileRequest, ErrorClass, Memory};

/// What to answer and how.
#[derive(Debug, Clone, Copy)]
pub struct AnswerRequest<'a> {
    /// Namespace, question, as-of time and the context's budget (in the reader's tokens).
    pub query: &'a CompileQuery,
    /// Every result-changing compile setting.
    pub config: &'a CompileConfig,
    /// The question's embeddings the caller already has ([`CompileRequest::query_vectors`](crate::CompileRequest::query_vectors)).
    pub query_vectors: &'a [IdentifiedVector],
    /// The tokenizer budgets are counted in, for a reader that has none of its own (a remote
    /// endpoint). Must be `None` for a local reader: its own tokenizer is the exact one.
    pub tokenizer: Option<&'a dyn ReaderTokenizer>,
    /// When the question is asked, as the reader should read it (`2023/05/30 (Tue) 23:40`).
    pub question_date: Option<&'a str>,
    /// How the reader decodes.
    pub decoding: DecodingSettings,
}

/// A compiled context and the reader's answer to it.
#[derive(Debug, Clone)]
pub struct AnswerReport {
    /// The context the reader was given (or the compiler's abstention).
    pub context: CompiledContext,
    /// The reader's answer; `None` when the compiler abstained and the reader was not asked.
    pub answer: Option<Answer>,
    /// The compile step with its timings.
    pub compile: CompileTimings,
}

/// Where the compile step's time went.
#[derive(Debug, Clone, Copy)]
pub struct CompileTimings {
    /// The whole compile, seconds.
    pub seconds: f64,
}

impl AnswerReport {
    /// Whether the answer is an abstention, by the compiler or by the reader.
    pub fn abstained(&self) -> bool {
        self.answer.as_ref().is_none_or(|a| a.abstained)
    }

    /// What every front end returns: the answer (text, cited records, reader identity, tokens,
    /// seconds) or the abstention, and the context it was read from.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "abstained": self.abstained(),
            "compiler_abstained": self.context.abstain,
            "abstain_reason": self.context.abstain_reason.as_ref().map(|r| r.to_string()),
            "answer": self.answer,
            "context": {
                "tokens_used": self.context.tokens_used,
                "budget": self.context.budget.tokens(),
                "reader_tokenizer": self.context.reader_tokenizer,
                "support": self.context.support,
                "text": self.context.text,
            },
            "compile_seconds": self.compile.seconds,
        })
    }
}

/// Why [`Memory::answer`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// Compiling the context failed.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The reader has no tokenizer of its own and the request names none.
    #[error(
        "the reader {reader} cannot count tokens locally: name the tokenizer its model uses \
         (o200k_base, cl100k_base or a tokenizer.json) so the budget is counted in it"
    )]
    TokenizerNeeded {
        /// The reader's label.
        reader: String,
    },
    /// A tokenizer was named for a reader that has its own.
    #[error(
        "the reader {reader} counts in its own tokenizer {own}; a budget counted in {given} \
         would not be exact: leave the tokenizer out"
    )]
    TokenizerConflict {
        /// The reader's label.
        reader: String,
        /// Its tokenizer.
        own: String,
        /// The one named.
        given: String,
    },
    /// The budget alone, plus the tokens to generate, does not fit the reader's window.
    #[error(
        "a budget of {budget} tokens plus up to {max_new_tokens} new tokens exceeds the \
         reader's context window of {context_window} tokens (the prompt's instructions and \
         chat template need more): lower the budget"
    )]
    BudgetOverWindow {
        /// The budget asked for.
        budget: u32,
        /// Tokens the reader may generate.
        max_new_tokens: u32,
        /// The reader's window.
        context_window: u32,
    },
    /// The reader refused the prompt or failed.
    #[error("reader: {0}")]
    Read(#[from] ReadError),
}

impl AnswerError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            AnswerError::Compile(e) => e.class(),
            AnswerError::TokenizerNeeded { .. }
            | AnswerError::TokenizerConflict { .. }
            | AnswerError::BudgetOverWindow { .. } => ErrorClass::BadInput,
            AnswerError::Read(e) => read_error_class(e),
        }
    }

    /// The request field to blame when the caller's input is at fault.
    pub fn field(&self) -> Option<String> {
        match self {
            AnswerError::Compile(e) => e.field(),
            AnswerError::TokenizerNeeded { .. } | AnswerError::TokenizerConflict { .. } => {
                Some("tokenizer".to_owned())
            }
            AnswerError::BudgetOverWindow { .. }
            | AnswerError::Read(ReadError::PromptTooLong { .. }) => Some("budget".to_owned()),
            AnswerError::Read(ReadError::ControlTokenInContent { .. }) => Some("query".to_owned()),
            AnswerError::Read(_) => None,
        }
    }
}

/// The class of a reader failure: a prompt the reader refuses is the caller's input, a failing
/// endpoint or model is not.
pub(crate) fn read_error_class(e: &ReadError) -> ErrorClass {
    match e {
        ReadError::PromptTooLong { .. }
        | ReadError::ControlTokenInContent { .. }
        | ReadError::InvalidMessages { .. }
        | ReadError::InvalidDecoding { .. }
        | ReadError::Config { .. } => ErrorClass::BadInput,
        ReadError::Http { .. } | ReadError::Remote { .. } | ReadError::InvalidResponse { .. } => {
            ErrorClass::Io
        }
        _ => ErrorClass::Internal,
    }
}

impl Memory {
    /// Compiles a context for `request.query` counted in `reader`'s tokenizer, has the reader
    /// read it, and returns its answer with the records it cited (see the module docs).
    pub fn answer(
        &self,
        request: &AnswerRequest<'_>,
        reader: &dyn Reader,
    ) -> Result<AnswerReport, AnswerError> {
        let label = || reader.identity().label();
        let own = reader.tokenizer();
        let tokenizer: Arc<dyn ReaderTokenizer>;
        let counting: &dyn ReaderTokenizer = match (&own, request.tokenizer) {
            (Some(own), None) => {
                tokenizer = own.clone();
                tokenizer.as_ref()
            }
            (Some(own), Some(given)) if given.name() == own.name() => given,
            (Some(own), Some(given)) => {
                return Err(AnswerError::TokenizerConflict {
                    reader: label(),
                    own: own.name().to_owned(),
                    given: given.name().to_owned(),
                });
            }
            (None, Some(given)) => given,
            (None, None) => return Err(AnswerError::TokenizerNeeded { reader: label() }),
        };
        let max_new_tokens = request.decoding.max_new_tokens;
        let budget = request.query.budget.tokens();
        if let Some(window) = reader.context_window()
            && u64::from(budget) + u64::from(max_new_tokens) > u64::from(window)
        {
            return Err(AnswerError::BudgetOverWindow {
                budget,
                max_new_tokens,
                context_window: window,
            });
        }
        let started = std::time::Instant::now();
        let CompileReport { context, .. } = self.compile_report(&CompileRequest {
            query: request.query,
            config: request.config,
            reader: counting,
            query_vectors: request.query_vectors,
        })?;
        let compile = CompileTimings { seconds: started.elapsed().as_secs_f64() };
        if context.abstain {
            return Ok(AnswerReport { context, answer: None, compile });
        }
        let prompt = build_answer_prompt(&PromptRequest {
            question: &request.query.question,
            context: &context.text,
            question_date: request.question_date,
        });
        let answer = evicortex_reader::answer(reader, &prompt, &request.decoding)?;
        Ok(AnswerReport { context, answer: Some(answer), compile })
    }
}
