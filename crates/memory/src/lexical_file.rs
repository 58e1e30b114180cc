//! The lexical indexes of a namespace kept on disk, so that a process opening the store loads
//! them instead of analysing every turn again: the turn BM25 index and the context-window BM25
//! index, as derived data beside the store, in `DIR/lexical-index/<blake3(namespace)[..16]
//! hex>-lexical.bm25` (layout in `docs/lexical-index.md`).
//!
//! The rules are the graph files' ([`crate::ann`]): a file records the namespace record it
//! covers and is used only when no turn of the namespace was erased after that record and the
//! turns it holds are the namespace's first ones; it is then extended with the turns after it.
//! It is written only when it covers the namespace's last record, under the writer lock of
//! derived data and the index files' lock across processes, never after an erasure it missed,
//! and every erasure of the namespace removes it.

use evicortex_ledger::EvidenceLedger;
use std::{
    io::{BufReader, Read},
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use evicortex_compiler::WindowIndex;
use evicortex_core::{Evidence, Namespace, TurnId};
use evicortex_lexical::Bm25Index;
use evicortex_vector::{
    ChecksumReader, IndexFileError, index_file_prefix, remove_index_file, write_index_file,
};

use crate::{
    CompileError, Memory, OpenError,
    derived_view::DerivedView,
    index_cache::{BM25, IndexCache, NamespaceIndexes, cached_analyzer},
    index_files,
    memory::Inner,
};

/// The directory of the lexical index files inside a store directory.
pub const LEXICAL_INDEX_DIR: &str = "lexical-index";

/// Turns a namespace must hold for its lexical indexes to be written, when
/// [`crate::MemoryBuilder::lexical_files_from`] is not given: below it, analysing them again on
/// open takes a fraction of a second.
pub const DEFAULT_LEXICAL_FILES_FROM: usize = 2_048;

const MAGIC: [u8; 8] = *b"EVXBM25\0";
const VERSION: u32 = 1;

/// The file of `namespace`'s lexical indexes in `dir`.
fn file_path(dir: &Path, namespace: &Namespace) -> PathBuf {
    dir.join(format!("{}lexical.bm25", index_file_prefix(namespace)))
}

fn file_err(namespace: &Namespace, source: IndexFileError) -> CompileError {
    CompileError::IndexFile { namespace: namespace.clone(), source }
}

/// What a current file gives: the turn index over the namespace's first `records` live turns,
/// and the window index over the same turns when one was saved.
pub(crate) struct SavedLexical {
    pub(crate) lexical: Bm25Index,
    pub(crate) window: Option<WindowIndex>,
    pub(crate) records: usize,
}

/// The file's namespace and covered record, read without the rest.
pub(crate) struct Header {
    pub(crate) namespace: Namespace,
    pub(crate) covers: TurnId,
}

/// The saved indexes of `namespace` when its file is current for `live` (the namespace's live
/// turns, in ledger order); a stale, damaged or mismatched file is removed.
pub(crate) fn load(
    view: DerivedView<'_>,
    namespace: &Namespace,
    live: &[Evidence],
) -> Result<Option<SavedLexical>, CompileError> {
    let cache = &view.indexes;
    let (Some(dir), Some(_)) = (cache.lexical_dir.as_deref(), cache.lexical_files_from) else {
        return Ok(None);
    };
    let path = file_path(dir, namespace);
    let file = match fs_err::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(file_err(namespace, IndexFileError::Io { path, source })),
    };
    let discard = |reason: &str| {
        tracing::info!(path = %path.display(), reason, "lexical index file not used: rebuilding");
        remove_index_file(&path).map(|_| None).map_err(|e| file_err(namespace, e))
    };
    let mut reader = ChecksumReader::new(file);
    let header = match read_header(&mut reader) {
        Ok(header) => header,
        Err(problem) => return problem.resolve(&path, namespace, discard),
    };
    if header.namespace != *namespace {
        return discard("written for another namespace");
    }
    if view.last_erasure(namespace)?.is_some_and(|erased| erased > header.covers) {
        return discard("a turn was erased after the record it covers");
    }
    let body = match read_body(&mut reader) {
        Ok(body) => body,
        Err(problem) => return problem.resolve(&path, namespace, discard),
    };
    match reader.finish() {
        Ok(Ok(())) => {}
        Ok(Err(detail)) => return discard(&detail),
        Err(source) => return Err(file_err(namespace, IndexFileError::Io { path, source })),
    }
    let (lexical, window) = body;
    if let Err(reason) = matches_live(&lexical, window.as_ref(), header.covers, live) {
        return discard(&reason);
    }
    tracing::debug!(path = %path.display(), turns = lexical.len(), "lexical index file loaded");
    Ok(Some(SavedLexical { records: lexical.len(), lexical, window }))
}

/// Whether the saved indexes are the ones this process would build from the first turns of
/// `live`: the cached BM25 settings, exactly the live turns up to the covered record, in order.
fn matches_live(
    lexical: &Bm25Index,
    window: Option<&WindowIndex>,
    covers: TurnId,
    live: &[Evidence],
) -> Result<(), String> {
    if lexical.params() != BM25 || lexical.analyzer() != cached_analyzer() {
        return Err("written under other BM25 settings".to_owned());
    }
    if lexical.covers() != Some(covers) {
        return Err("its turn index covers another record".to_owned());
    }
    let n = lexical.len();
    let held = live.iter().take_while(|e| e.id <= covers).count();
    let same = held == n
        && live[..n]
            .iter()
            .enumerate()
            .all(|(row, e)| lexical.row(e.id).map(|r| r.index()) == Some(row));
    if !same {
        return Err("its turns are not the namespace's live turns".to_owned());
    }
    if window.is_some_and(|w| w.built_for() != n) {
        return Err("its window index covers other turns".to_owned());
    }
    Ok(())
}

/// Whether `indexes`' lexical indexes are due to be written: the namespace holds enough turns,
/// they cover its last record and the turn index grew by more than an eighth since it was last
/// written.
pub(crate) fn due(cache: &IndexCache, indexes: &NamespaceIndexes) -> bool {
    let (Some(_), Some(from)) = (cache.lexical_dir.as_deref(), cache.lexical_files_from) else {
        return false;
    };
    let turns = indexes.lexical.len();
    let grown = indexes.lexical_saved().is_none_or(|saved| turns - saved.min(turns) > saved / 8);
    let window_current = indexes.window.as_ref().is_none_or(|w| w.built_for() == turns);
    turns >= from
        && grown
        && window_current
        && indexes.corpus.len() == turns
        && indexes.lexical.covers().is_some()
}

/// Writes `indexes`' lexical indexes when they are [`due`].
pub(crate) fn save_if_grown(
    view: DerivedView<'_>,
    namespace: &Namespace,
    indexes: &NamespaceIndexes,
) -> Result<(), CompileError> {
    let cache = &view.indexes;
    if !due(cache, indexes) {
        return Ok(());
    }
    let (Some(dir), Some(covers)) = (cache.lexical_dir.as_deref(), indexes.lexical.covers()) else {
        return Ok(());
    };
    let turns = indexes.lexical.len();
    let Some(_guard) = index_files::begin_write(view, namespace, covers, dir)? else {
        return Ok(());
    };
    let path = file_path(dir, namespace);
    let lexical = &indexes.lexical;
    let window = indexes.window.as_ref();
    write_index_file(&path, |out| {
        out.write_all(&MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        let ns = namespace.as_str().as_bytes();
        out.write_all(&(ns.len() as u32).to_le_bytes())?;
        out.write_all(ns)?;
        out.write_all(&covers.raw().to_le_bytes())?;
        lexical.write_to(out)?;
        match window {
            Some(w) => {
                out.write_all(&[1])?;
                out.write_all(&w.radius().to_le_bytes())?;
                out.write_all(&(w.built_for() as u64).to_le_bytes())?;
                w.index().write_to(out)
            }
            None => out.write_all(&[0]),
        }
    })
    .map_err(|e| file_err(namespace, e))?;
    indexes.set_lexical_saved(turns);
    Ok(())
}

/// How often a background write checks whether its namespace has been quiet long enough.
const QUIET_POLL: Duration = Duration::from_millis(250);

/// Writes `namespace`'s lexical indexes on a thread of their own once no refresh has changed
/// them for `quiet` (the caller has claimed the write: [`NamespaceIndexes::claim_saving`]). The
/// thread holds the indexes' shared lock while it writes, so compiles keep searching; it ends
/// without writing when the memory or the namespace's indexes are dropped first.
pub(crate) fn save_when_quiet(
    memory: &Arc<Inner>,
    slot: &Arc<RwLock<NamespaceIndexes>>,
    namespace: &Namespace,
    quiet: Duration,
) {
    let (weak_memory, weak_slot) = (Arc::downgrade(memory), Arc::downgrade(slot));
    let namespace = namespace.clone();
    let spawned = std::thread::Builder::new().name("evicortex-index-files".to_owned()).spawn(
        move || loop {
            std::thread::sleep(quiet.min(QUIET_POLL));
            let Some(slot) = weak_slot.upgrade() else { return };
            let indexes = slot.read().unwrap_or_else(PoisonError::into_inner);
            if indexes.last_refresh.elapsed() < quiet {
                continue;
            }
            if let Some(inner) = weak_memory.upgrade() {
                let memory = Memory { inner };
                if let Err(e) = save_if_grown(memory.view(), &namespace, &indexes) {
                    // Derived data: the next growth of an eighth tries again.
                    tracing::warn!(%namespace, error = %e, "writing the lexical index file failed");
                }
            }
            indexes.end_saving();
            return;
        },
    );
    if let Err(e) = spawned {
        slot.read().unwrap_or_else(PoisonError::into_inner).end_saving();
        tracing::warn!(error = %e, "could not start the lexical index file's writer");
    }
}

/// A file that could not be read: damaged (removed and rebuilt) or unreadable (an error).
pub(crate) enum Problem {
    Damaged(String),
    Io(std::io::Error),
}

impl Problem {
    fn resolve(
        self,
        path: &Path,
        namespace: &Namespace,
        discard: impl Fn(&str) -> Result<Option<SavedLexical>, CompileError>,
    ) -> Result<Option<SavedLexical>, CompileError> {
        match self {
            Problem::Damaged(detail) => discard(&detail),
            Problem::Io(source) => {
                Err(file_err(namespace, IndexFileError::Io { path: path.to_owned(), source }))
            }
        }
    }
}

impl From<std::io::Error> for Problem {
    fn from(e: std::io::Error) -> Problem {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Problem::Damaged("truncated".to_owned()),
            std::io::ErrorKind::InvalidData => Problem::Damaged(e.to_string()),
            _ => Problem::Io(e),
        }
    }
}

pub(crate) fn read_header(input: &mut impl Read) -> Result<Header, Problem> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    if magic != MAGIC {
        return Err(Problem::Damaged("wrong magic bytes".to_owned()));
    }
    let version = u32::from_le_bytes(array(input)?);
    if version != VERSION {
        return Err(Problem::Damaged(format!(
            "layout version {version}, this build reads {VERSION}"
        )));
    }
    let len = u32::from_le_bytes(array(input)?) as usize;
    if len > 4096 {
        return Err(Problem::Damaged(format!("a namespace of {len} bytes")));
    }
    let mut ns = vec![0u8; len];
    input.read_exact(&mut ns)?;
    let namespace = String::from_utf8(ns)
        .ok()
        .and_then(|ns| Namespace::new(&ns).ok())
        .ok_or_else(|| Problem::Damaged("invalid namespace".to_owned()))?;
    let covers = TurnId::from_raw(u64::from_le_bytes(array(input)?));
    Ok(Header { namespace, covers })
}

pub(crate) fn read_body(
    input: &mut impl Read,
) -> Result<(Bm25Index, Option<WindowIndex>), Problem> {
    let lexical = Bm25Index::read_from(input)?;
    let window = match array::<1>(input)?[0] {
        0 => None,
        1 => {
            let radius = u32::from_le_bytes(array(input)?);
            let built_for = u64::from_le_bytes(array(input)?) as usize;
            let index = Bm25Index::read_from(input)?;
            let window = WindowIndex::from_saved(radius, index, built_for)
                .ok_or_else(|| Problem::Damaged("an inconsistent window index".to_owned()))?;
            Some(window)
        }
        flag => return Err(Problem::Damaged(format!("window flag {flag}"))),
    };
    Ok((lexical, window))
}

fn array<const N: usize>(input: &mut impl Read) -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Removes what an erasure interrupted before its purge left behind: files of a namespace
/// erased after the record they cover, files that cannot be read, and the temporary files of
/// writers killed before their rename.
pub(crate) fn reconcile(dir: &Path, ledger: &dyn EvidenceLedger) -> Result<(), OpenError> {
    let io = |path: &Path, source| OpenError::IndexFile {
        source: IndexFileError::Io { path: path.to_owned(), source },
    };
    index_files::reconcile(dir, "bm25", |path| {
        let file = fs_err::File::open(path).map_err(|source| io(path, source))?;
        match read_header(&mut BufReader::new(file)) {
            Ok(header) => {
                Ok(ledger.last_erasure(&header.namespace)?.is_some_and(|e| e > header.covers))
            }
            Err(Problem::Damaged(_)) => Ok(true),
            Err(Problem::Io(source)) => Err(io(path, source)),
        }
    })
}

#[cfg(test)]
mod tests;
