//! EviCortex: evidence-first long-term memory for LLM assistants.
//!
//! [`Memory`] is the library users depend on: it owns a store directory whose ledger
//! (`ledger.sqlite`) is the only source of truth, and the derived stores (embedding cache,
//! indexes) built from it. Turns go in with [`Memory::append`] (atomic, durable, idempotent);
//! [`Memory::evidence`] reads a namespace back in ledger order; [`Memory::erase`] forgets a
//! namespace, session or record everywhere; [`Memory::verify`] proves nothing was altered.
//!
//! ```
//! use evicortex::{IngestOptions, Memory, parse_jsonl};
//! use evicortex_core::Namespace;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let memory = Memory::open(dir.path()).unwrap();
//! let jsonl = br#"{"namespace":"alice","session":"s1","turn":0,"role":"user","text":"I moved to Lisbon in May.","time":"2024-05-02T10:00:00+01:00"}"#;
//! let turns = parse_jsonl("inline", jsonl, &IngestOptions::default()).unwrap();
//! memory.append(&turns).unwrap();
//! let evidence = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
//! assert_eq!(evidence[0].turn.text, "I moved to Lisbon in May.");
//! memory.verify().unwrap();
//! ```
#![warn(missing_docs)]

mod compile;
mod derived;
mod embedding_cache;
mod error;
mod export;
mod jsonl;
mod memory;
mod migrate;
mod stats;

pub use crate::{
    compile::{CompileError, CompileReport, CompileRequest, DenseRequest, QueryVector},
    derived::{DerivedStore, DerivedStoreError},
    embedding_cache::{
        CatchUpLimits, EMBEDDINGS_FILE, EmbedProgress, EmbedReport, EmbeddingCache,
        EmbeddingCacheError, NamespaceVectors, RefusedTurn, embed_pending,
    },
    error::{AppendError, EraseError, ErrorClass, ExportError, OpenError, ReadError, VerifyError},
    export::{ExportSummary, export_line},
    jsonl::{
        DEFAULT_MAX_TEXT_BYTES, FieldError, IngestError, IngestOptions, deserialize_turn_objects,
        parse_jsonl, parse_jsonl_numbered, turn_from_json,
    },
    memory::{LEDGER_FILE, Memory},
    migrate::migrate_store,
    stats::Stats,
};
/// The context compiler's types (configuration, query, output, tokenizers, rerankers).
pub use evicortex_compiler as compiler;
pub use evicortex_ledger::{
    AppendOutcome, AppendReceipt, AppendStatus, ChainHash, ConflictingRecord, EraseReceipt,
    EraseTarget, ErasedTurn, LedgerStats, MigrateError, MigrationReport, OpenMode, VerifyReport,
};
