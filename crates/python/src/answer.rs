//! `Memory.answer`: the local reader (loaded once per process and model) reads a context
//! compiled in its own tokens. A build without the local reader (the default
//! `pip install ./python`) refuses with a `model_missing` error that says so; a `Client`
//! answers through the server's reader in either build.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, PoisonError},
};

use evicortex::{GgufManifest, Reader};
use pyo3::prelude::*;

use crate::{Failure, NativeMemory};

/// Whether this build has the local reader (the cargo feature `local-reader`).
#[pyfunction]
pub(crate) fn local_reader_built() -> bool {
    evicortex::LOCAL_READER_BUILT
}

/// Answers `query` from `namespace` with the local reader `reader` (default: the committed
/// default reader), the context packed into `budget` of the reader's own tokens. Returns the
/// answer report as JSON (`POST .../answer`'s body).
#[pyfunction]
#[pyo3(signature = (memory, namespace, query, budget, reader, as_of, settings_json, max_new_tokens))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn answer(
    py: Python<'_>,
    memory: &Bound<'_, NativeMemory>,
    namespace: &str,
    query: String,
    budget: u32,
    reader: Option<&str>,
    as_of: Option<&str>,
    settings_json: &str,
    max_new_tokens: u32,
) -> PyResult<String> {
    let native = memory.get();
    let decoding = evicortex::front_end::requested_decoding(Some(max_new_tokens))
        .map_err(|e| Failure::bad_input(e.field, e.reason))?;
    let question = native.question(namespace, query, budget, as_of, settings_json)?;
    let name = match reader {
        Some(name) => name.to_owned(),
        None => GgufManifest::committed()[0].name.clone(),
    };
    let reader = py.detach(|| local_reader(&name))?;
    let report = py.detach(|| -> Result<_, Failure> {
        native.catch_up(&question)?;
        let request = question.answer_request(None, decoding);
        native.memory.answer(&request, reader.as_ref()).map_err(|e| Failure::of(&e))
    })?;
    Ok(report.to_json().to_string())
}

/// The local reader `name`, loaded and digest-checked once per process: a model is hundreds
/// of megabytes to a gigabyte.
fn local_reader(name: &str) -> Result<Arc<dyn Reader>, Failure> {
    static READERS: OnceLock<Mutex<HashMap<String, Arc<dyn Reader>>>> = OnceLock::new();
    let mut readers =
        READERS.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(reader) = readers.get(name) {
        return Ok(Arc::clone(reader));
    }
    let reader = evicortex::load_local_reader(name).map_err(|e| {
        let mut failure = Failure::of(&e);
        failure.field = Some("reader".to_owned());
        failure
    })?;
    readers.insert(name.to_owned(), Arc::clone(&reader));
    Ok(reader)
}
