//! `evicortex._native`: the `evicortex` facade for Python.
//!
//! A front end like the CLI and the servers: it parses what Python passes, calls [`Memory`] and
//! renders the result. Values cross the boundary as JSON text, in the same shapes the HTTP API
//! uses, so the pure-Python layer (`python/evicortex`) builds one set of typed results for the
//! embedded memory and for the HTTP client alike. Every call that touches the store or a model
//! releases the GIL.
//!
//! Errors are raised as `NativeError(class, field, message)`, where `class` is the facade's
//! [`ErrorClass`] (`bad_input`, `io`, `integrity`, `model_missing`, `internal`) and `field` the
//! path of the offending input (`turns[2].time`, `rrf_k`), when known; the Python layer maps
//! them to its exception classes.

use std::{error::Error, path::PathBuf, sync::Arc};

use evicortex::front_end::{
    AppendResponse, BadInputKind, BlamedField, EraseResponse, PreparedQuestion, QuestionRequest,
    ReaderTokenizers, RequestFailure, TurnsNamespace, VerifyResponse, erase_target, error_chain,
    turns_from_objects,
};
use evicortex::{
    CompileConfig, ErrorClass, EventTime, Memory, Namespace, ReaderTokenizer, SessionId, TurnId,
};
use pyo3::{create_exception, exceptions::PyException, prelude::*};

mod answer;
use serde_json::{Map, Value};

create_exception!(
    _native,
    NativeError,
    PyException,
    "A facade error: args are (class, field or None, message)."
);

/// An open store, with the pinned encoder unless opened lexical-only.
#[pyclass(frozen, module = "evicortex._native")]
struct NativeMemory {
    memory: Memory,
    readers: ReaderTokenizers,
}

/// Why a call failed, before it becomes a Python exception.
struct Failure {
    class: ErrorClass,
    /// A finer kind of bad input, as the HTTP API distinguishes it (404, 409).
    kind: Option<BadInputKind>,
    field: Option<String>,
    message: String,
}

impl Failure {
    fn bad_input(field: impl Into<String>, message: impl std::fmt::Display) -> Failure {
        let field = field.into();
        Failure {
            class: ErrorClass::BadInput,
            kind: None,
            message: format!("{field}: {message}"),
            field: Some(field),
        }
    }

    fn internal(message: impl std::fmt::Display) -> Failure {
        Failure {
            class: ErrorClass::Internal,
            kind: None,
            field: None,
            message: message.to_string(),
        }
    }

    /// The failure of a facade error ([`RequestFailure`]), its message the whole chain of
    /// causes; a compile setting is blamed by its own name, as Python passes it.
    fn of(err: &(dyn Error + 'static)) -> Failure {
        let failure = RequestFailure::of(err);
        let field = failure.field.and_then(|field| match field {
            BlamedField::Request(field) | BlamedField::Setting(field) => Some(field),
            BlamedField::Settings => None,
        });
        Failure { class: failure.class, kind: failure.kind, field, message: error_chain(err) }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        let class = match (f.class, f.kind) {
            (ErrorClass::BadInput, Some(BadInputKind::Conflict)) => "conflict",
            (ErrorClass::BadInput, Some(BadInputKind::NotFound)) => "not_found",
            (ErrorClass::BadInput, _) => "bad_input",
            (ErrorClass::Io, _) => "io",
            (ErrorClass::Integrity, _) => "integrity",
            (ErrorClass::ModelMissing, _) => "model_missing",
            _ => "internal",
        };
        NativeError::new_err((class, f.field, f.message))
    }
}

/// A response as JSON text, in the shape the HTTP API returns it.
fn to_json(response: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(response).map_err(|e| Failure::internal(e).into())
}

fn namespace(raw: &str, field: &str) -> Result<Namespace, Failure> {
    Namespace::new(raw).map_err(|e| Failure::bad_input(field, e))
}

fn parse_json<T: serde::de::DeserializeOwned>(text: &str, field: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::bad_input(field, e))
}

#[pymethods]
impl NativeMemory {
    /// Opens (or creates) the store in `path`; with `dense`, loads the store's encoders (the
    /// pinned encoder unless `evicortex encoders` named others) from the model cache (a missing model is a `model_missing` error naming `evicortex model fetch`).
    #[new]
    fn new(py: Python<'_>, path: PathBuf, dense: bool) -> PyResult<NativeMemory> {
        let memory = py.detach(|| -> Result<Memory, Failure> {
            let mut builder = Memory::builder(&path);
            // One writing process per store: a store `evicortex serve` (or another `Memory`)
            // holds is refused, naming the holder.
            builder.lock_store();
            if dense {
                builder.store_encoders(None).map_err(|e| Failure::of(&e))?;
            }
            builder.open().map_err(|e| Failure::of(&e))
        })?;
        Ok(NativeMemory { memory, readers: ReaderTokenizers::default() })
    }

    /// Whether dense retrieval is available (the pinned encoder is loaded).
    fn has_encoder(&self) -> bool {
        self.memory.has_encoder()
    }

    /// Appends a JSON array of turn objects (the JSONL ingest fields) as one atomic batch;
    /// `namespace` is the namespace of turns that give none. Returns the receipt as JSON.
    #[pyo3(signature = (turns_json, namespace=None))]
    fn append(
        &self,
        py: Python<'_>,
        turns_json: &str,
        namespace: Option<&str>,
    ) -> PyResult<String> {
        let objects: Vec<Map<String, Value>> = parse_json(turns_json, "turns")?;
        let default_namespace = namespace.map(|n| self::namespace(n, "namespace")).transpose()?;
        let turns =
            turns_from_objects(&objects, &TurnsNamespace::Default(default_namespace), usize::MAX)
                .map_err(|e| Failure::bad_input(e.field, e.reason))?;
        let receipt = py.detach(|| self.memory.append(&turns)).map_err(|e| Failure::of(&e))?;
        to_json(&AppendResponse::from(&receipt))
    }

    /// Compiles a context: the committed default configuration (dense when the encoder is
    /// loaded) with `settings_json` (an object of configuration fields) applied over it.
    /// Embeds the namespace's turns not embedded yet first. Returns the compiled context as
    /// JSON.
    #[pyo3(signature = (namespace, query, budget, reader_tokenizer, as_of, settings_json))]
    #[allow(clippy::too_many_arguments)]
    fn compile(
        &self,
        py: Python<'_>,
        namespace: &str,
        query: String,
        budget: u32,
        reader_tokenizer: &str,
        as_of: Option<&str>,
        settings_json: &str,
    ) -> PyResult<String> {
        let question = self.question(namespace, query, budget, as_of, settings_json)?;
        let reader = py.detach(|| self.reader(reader_tokenizer))?;
        let context = py.detach(|| -> Result<_, Failure> {
            self.catch_up(&question)?;
            let request = question.compile_request(reader.as_ref());
            self.memory.compile(&request).map_err(|e| Failure::of(&e))
        })?;
        Ok(context.to_json())
    }

    /// Erases one target of `namespace`: a session, a record, or (`all`) the whole namespace.
    /// Returns the receipt as JSON.
    #[pyo3(signature = (namespace, session, record, all))]
    fn erase(
        &self,
        py: Python<'_>,
        namespace: &str,
        session: Option<&str>,
        record: Option<u64>,
        all: bool,
    ) -> PyResult<String> {
        let namespace = self::namespace(namespace, "namespace")?;
        let session = session
            .map(SessionId::new)
            .transpose()
            .map_err(|e| Failure::bad_input("session", e))?;
        let target = erase_target(
            &namespace,
            session,
            record.map(TurnId::from_raw),
            all.then_some(true),
            "target",
        )
        .map_err(|e| Failure::bad_input(e.field, e.reason))?;
        let receipt = py.detach(|| self.memory.erase(&target)).map_err(|e| Failure::of(&e))?;
        to_json(&EraseResponse::from(&receipt))
    }

    /// Checks every record's digest and chain link. Returns the report as JSON.
    fn verify(&self, py: Python<'_>) -> PyResult<String> {
        let report = py.detach(|| self.memory.verify()).map_err(|e| Failure::of(&e))?;
        to_json(&VerifyResponse::from(&report))
    }

    /// Counts of one namespace's live turns, as JSON.
    fn stats(&self, py: Python<'_>, namespace: &str) -> PyResult<String> {
        let ns = self::namespace(namespace, "namespace")?;
        let stats = py.detach(|| self.memory.namespace_stats(&ns)).map_err(|e| Failure::of(&e))?;
        to_json(&stats)
    }

    /// The live turns (of `namespace`, or all) as JSONL, in ledger order.
    #[pyo3(signature = (namespace=None))]
    fn export(&self, py: Python<'_>, namespace: Option<&str>) -> PyResult<String> {
        let namespace = namespace.map(|n| self::namespace(n, "namespace")).transpose()?;
        let mut out = Vec::new();
        py.detach(|| self.memory.export(namespace.as_ref(), &mut out))
            .map_err(|e| Failure::of(&e))?;
        String::from_utf8(out).map_err(|e| Failure::internal(e).into())
    }

    /// The configuration a compile with `settings_json` would use, as JSON (every field).
    fn config_json(&self, settings_json: &str) -> PyResult<String> {
        let settings: Map<String, Value> = parse_json(settings_json, "settings")?;
        let config = self.config(&settings)?;
        serde_json::to_string(&config).map_err(|e| Failure::internal(e).into())
    }
}

impl NativeMemory {
    /// A question of Python's arguments made ready to compile or answer: `settings_json` (an
    /// object of configuration fields) applied over the memory's default configuration.
    fn question(
        &self,
        namespace: &str,
        query: String,
        budget: u32,
        as_of: Option<&str>,
        settings_json: &str,
    ) -> Result<PreparedQuestion, Failure> {
        let namespace = self::namespace(namespace, "namespace")?;
        let as_of = as_of
            .map(|raw| EventTime::parse_rfc3339(raw).map_err(|e| Failure::bad_input("as_of", e)))
            .transpose()?;
        let settings: Map<String, Value> = parse_json(settings_json, "settings")?;
        let request =
            QuestionRequest { namespace, question: query, as_of, budget, options: Some(&settings) };
        self.memory.prepare_question(request).map_err(|e| Failure::of(&e))
    }

    /// Embeds the question's namespace's turns not embedded yet, when its compile reads vectors.
    fn catch_up(&self, question: &PreparedQuestion) -> Result<(), Failure> {
        let PreparedQuestion { query, config } = question;
        self.memory
            .catch_up_for_compile(&query.namespace, config, &mut |_| {})
            .map(drop)
            .map_err(|e| Failure::of(&e))
    }

    /// The memory's default configuration (as every door's) with `settings` applied over it.
    fn config(&self, settings: &Map<String, Value>) -> Result<CompileConfig, Failure> {
        self.memory.config_with_options(settings).map_err(|e| Failure::of(&e))
    }

    /// The reader tokenizer `name` (loaded once per memory).
    fn reader(&self, name: &str) -> Result<Arc<dyn ReaderTokenizer>, Failure> {
        self.readers.get(name).map_err(|e| Failure::bad_input("reader_tokenizer", e))
    }
}

/// The module `evicortex._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeMemory>()?;
    m.add_function(wrap_pyfunction!(answer::answer, m)?)?;
    m.add_function(wrap_pyfunction!(answer::local_reader_built, m)?)?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    Ok(())
}
