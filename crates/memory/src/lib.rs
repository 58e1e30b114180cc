//! EviCortex: evidence-first long-term memory for LLM assistants.
//!
//! [`Memory`] is the library users depend on, and the one door every front end (CLI, HTTP, MCP,
//! evaluation) goes through. It owns a store directory whose ledger (`ledger.sqlite`) is the
//! only source of truth, the derived stores built from it (the embedding cache, the compile
//! indexes), and optionally the encoder and reranker:
//!
//! - [`Memory::append`] stores turns atomically and durably (idempotent per turn);
//! - [`Memory::catch_up`] embeds the turns with no vector yet (content-addressed, resumable);
//! - [`Memory::compile`] packs the turns that support a question into a reader-token budget, or
//!   abstains (lexical, dense or hybrid, as its [`CompileConfig`] says);
//! - [`Memory::answer`] compiles a context counted in a [`Reader`]'s own tokens, has the reader
//!   read it and returns its answer with the records it cited, or the abstention;
//! - [`Memory::erase`] forgets a namespace, session or record everywhere, derived data included;
//! - [`Memory::verify`] proves nothing was altered; [`Memory::export`] writes it back as JSONL.
//!
//! Every error has an [`ErrorClass`] ([`ErrorClass::of`] finds it in any error chain), from which
//! front ends derive exit codes and HTTP statuses.
//!
//! ```
//! use evicortex::{
//!     CompileConfig, CompileQuery, CompileRequest, DenseConfig, IngestOptions, Memory,
//!     Namespace, TiktokenReader, TokenBudget, parse_jsonl,
//! };
//!
//! let dir = tempfile::tempdir().unwrap();
//! let memory = Memory::open(dir.path()).unwrap();
//! let jsonl = br#"{"namespace":"alice","session":"s1","turn":0,"role":"user","text":"I moved to Lisbon in May.","time":"2024-05-02T10:00:00+01:00"}"#;
//! let turns = parse_jsonl("inline", jsonl, &IngestOptions::default()).unwrap();
//! memory.append(&turns).unwrap();
//!
//! let query = CompileQuery {
//!     namespace: Namespace::new("alice").unwrap(),
//!     question: "Where did I move?".to_owned(),
//!     as_of: None,
//!     budget: TokenBudget::new(100),
//! };
//! let config = CompileConfig::hybrid(10, DenseConfig::Off);
//! let reader = TiktokenReader::o200k_base();
//! let request = CompileRequest { query: &query, config: &config, reader: &reader, query_vectors: &[] };
//! let context = memory.compile(&request).unwrap();
//! assert!(context.text.contains("I moved to Lisbon in May."));
//! memory.verify().unwrap();
//! ```
#![warn(missing_docs)]

mod ann;
mod answer;
mod background;
mod background_index;
mod background_thread;
mod catch_up;
mod compile;
mod compile_options;
mod dense;
mod dense_candidates;
mod derived;
mod derived_view;
mod embedding_cache;
mod encoder;
mod erase_documents;
mod erasure_watch;
mod error;
mod export;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod group_commit;
mod index_cache;
mod index_files;
mod jsonl;
mod lexical_file;
mod memory;
mod memory_builder;
mod migrate;
mod migrate_local_files;
mod migrate_postgres;
mod pg_dense;
mod reader_tokenizers;
mod request_config;
mod request_failure;
mod requests;
mod rerankers;
mod shared_data;
mod stats;
mod store_encoders;
mod store_location;
mod store_lock;
mod token_precount;
mod write_log;

pub use crate::{
    ann::{
        AnnSettings, DEFAULT_ANN_THRESHOLD, DEFAULT_MORE_SEEDS_FROM, DEFAULT_SKETCH_FROM,
        VECTOR_INDEX_DIR,
    },
    answer::{AnswerError, AnswerReport, AnswerRequest, CompileTimings},
    catch_up::{CatchUpLimits, EmbedProgress, EmbedReport, RefusedTurn},
    compile::{CompileError, CompileReport, CompileRequest},
    compile_options::CompileOptionsError,
    dense_candidates::DenseCandidates,
    derived::{DerivedStore, DerivedStoreError},
    embedding_cache::{EMBEDDINGS_FILE, EmbeddingCacheError},
    encoder::{
        check_catalogue_encoder, load_catalogue_encoder, load_pinned_encoder, pinned_encoder_config,
    },
    error::{
        AppendError, CatchUpError, EraseError, ErrorClass, ExportError, OpenError, ReadError,
        StorageCondition, VerifyError,
    },
    export::ExportSummary,
    group_commit::GroupCommitStats,
    index_cache::DEFAULT_INDEX_CACHE_BYTES,
    jsonl::{DEFAULT_MAX_TEXT_BYTES, FieldError, IngestError, IngestOptions, parse_jsonl},
    lexical_file::{DEFAULT_LEXICAL_FILES_FROM, LEXICAL_INDEX_DIR},
    memory::{LEDGER_FILE, Memory},
    memory_builder::MemoryBuilder,
    migrate::migrate_store,
    migrate_local_files::{CarriedFile, CarryError},
    migrate_postgres::{MigrateToPostgresError, PostgresMigration, migrate_to_postgres},
    rerankers::{
        ErasableVectors, LoadedReranker, RerankerSpec, RerankerSpecError, SECOND_STAGE_MODEL,
        load_reranker,
    },
    stats::Stats,
    store_encoders::{
        STORE_ENCODERS_FILE, StoreEncodersError, check_store_encoders, load_store_encoders,
        set_store_encoders, store_encoder_names,
    },
    store_location::{
        DERIVED_DIR_ENV, DERIVED_FROM_FILE, StoreLocation, is_postgres_url, store_files_dir,
    },
    store_lock::{LOCK_FILE, StoreLock, StoreLockError},
};

/// Domain types: turns, ids, times, namespaces, budgets.
pub use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, IdError, Namespace, Role, SessionId, TextDigest,
    TimeError, TokenBudget, Turn, TurnId, TurnIndex,
};

/// What the ledger reports: receipts of appends and erasures, statistics, verification.
pub use evicortex_ledger::{
    AppendOutcome, AppendReceipt, AppendStatus, ChainHash, ConflictingRecord,
    EraseError as LedgerEraseError, EraseReceipt, EraseTarget, ErasedTurn, LedgerPosition,
    LedgerStats, MigrateError, MigrationReport, OpenError as LedgerOpenError, OpenMode,
    StorageError, VerifyReport,
};

/// The HNSW graph's parameters ([`AnnSettings::params`]).
pub use evicortex_vector::{HnswParams, SketchParams, VectorHit};

/// A PostgreSQL URL with its password replaced, for messages.
pub use evicortex_postgres::redact_password as redact_postgres_password;

pub use evicortex_lexical::Analyzer;

/// The compile configuration, the question, the compiled context, reader tokenizers and
/// rerankers.
pub use evicortex_compiler::{
    AbstainReason, AbstentionConfig, AlsoDenseRef, BudgetParts, COMPILED_CONTEXT_FORMAT,
    CompileConfig, CompileQuery, CompiledContext, ContextConfig, ContextItem, ContextSearch,
    Coverage, DEFAULT_TOP_N, DedupPolicy, DenseConfig, DenseIndexRef, EncoderRef,
    ExcludedCandidate, ExclusionReason, Expansion, FilterReason, Layout, LexicalConfig, ListRank,
    LongTurns, MAX_ALSO_ENCODERS, MAX_RERANK_DEPTH, NamesConfig, RankScore, ReaderTokenizer,
    ReaderTokenizerError, RerankConfig, Reranker, ResolvedTime, Retriever, Selection,
    SessionConfig, SessionSpread, SpreadQuestions, StageTimings, SupportSignal, TiktokenReader,
    TimeConfig, reader_tokenizer,
};

/// The encoder a memory embeds with, and its errors.
pub use evicortex_embed::{
    DEFAULT_MODEL, EmbedError, EmbeddingRole, Encoder, EncoderConfig, EncoderIdentity,
    EncoderIdentityDigest, IdentifiedVector, Overlength, TextEmbedding,
};

/// The local reader: a pinned GGUF model run in-process by llama.cpp.
#[cfg(feature = "local-reader")]
pub use evicortex_reader::LocalGgufReader;
/// The shared reader: local GGUF models and chat-completions endpoints, the answer they give,
/// and the scores that judge it.
pub use evicortex_reader::{
    ABSTENTION_REPLY, Answer, AnswerCache, ChatCompletionsClient, ChatCompletionsConfig,
    DecodingSettings, GGUF_FILE, GgufManifest, ReadError as ReaderReadError, Reader,
    ReaderFetchOutcome, ReaderIdentity, ReaderModelError, fetch_reader_model, reader_install_dir,
};
/// The local reader by name in any build: without the feature `local-reader` it is refused
/// ([`ReaderModelError::LocalReaderNotBuilt`]).
pub use evicortex_reader::{LOCAL_READER_BUILT, load_local_reader};

/// What the front ends of this repository (CLI, HTTP, MCP, Python, the evaluation) need beyond
/// a library user's API: request-option parsing, line parsers and renderers, private store
/// files, the packer for evidence ranked elsewhere (the evaluation's controls and comparator
/// pack with it, so every system pays for the same preamble, headers and citations). Public so
/// that they go through this one crate; hidden from its documentation, and not a stable API.
#[doc(hidden)]
pub mod front_end {
    pub use crate::shared_data::shared_database;
    pub use crate::{
        compile_options::apply_compile_options,
        export::export_line,
        jsonl::{deserialize_turn_objects, parse_jsonl_numbered, turn_from_json},
        reader_tokenizers::ReaderTokenizers,
        request_config::{
            DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_LIMIT, PreparedQuestion, QuestionRequest,
            requested_decoding,
        },
        request_failure::{BadInputKind, BlamedField, RequestFailure, error_chain},
        requests::{
            AppendResponse, AppendedTurn, EraseResponse, NamespaceStatsResponse, TurnsNamespace,
            VerifyResponse, erase_target, turns_from_objects,
        },
    };
    pub use evicortex_compiler::{
        PREAMBLE, PackPolicy, RankedPack, RenderTurn, pack_ranked, render_chronological,
        turn_document,
    };
    pub use evicortex_ledger::{create_private_dir, restrict_sqlite_files};
    pub use evicortex_postgres::{PgShared, SharedDataError, StoredKey};
    pub use evicortex_reader::{
        ChatApiError, ChatApiErrorBody, ChatChoice, ChatCompletionRequest, ChatCompletionResponse,
        ChatReplyMessage, ChatUsage, FinishReason,
    };
}
