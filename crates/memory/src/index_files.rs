//! What the graph files ([`crate::ann`]) and the lexical files ([`crate::lexical_file`]) share:
//! the guard a writer holds from its erasure check to its rename, and the sweep at open that
//! removes what an interrupted erasure or a killed writer left behind.

use std::{path::Path, sync::MutexGuard};

use evicortex_core::{Namespace, TurnId};
use evicortex_vector::{IndexFileError, remove_abandoned_temporaries, remove_index_file};

use crate::{
    CompileError, OpenError,
    derived_view::{DerivedView, WriteState},
};

/// Held while an index file is written: the writer lock of derived data, and the index files'
/// lock across processes ([`crate::index_cache::IndexCache::lock_files`]) that every erasure's
/// purge takes too.
pub(crate) struct WriteGuard<'m> {
    _writes: MutexGuard<'m, WriteState>,
    _files: Option<std::fs::File>,
}

/// Takes both locks, then checks that no erasure of `namespace` lies after `covers` and
/// creates `dir`. `None` when one does: an erasure raced the build, so the indexes may hold
/// erased turns and are never written.
pub(crate) fn begin_write<'m>(
    view: DerivedView<'m>,
    namespace: &Namespace,
    covers: TurnId,
    dir: &Path,
) -> Result<Option<WriteGuard<'m>>, CompileError> {
    let err = |source| CompileError::IndexFile { namespace: namespace.clone(), source };
    let cache = &view.indexes;
    let writes = view.lock_writes();
    let files = cache
        .lock_files()
        .map_err(|source| err(IndexFileError::Io { path: cache.files_lock_path(), source }))?;
    if view.last_erasure(namespace)?.is_some_and(|erased| erased > covers) {
        return Ok(None);
    }
    evicortex_ledger::create_private_dir(dir)
        .map_err(|source| err(IndexFileError::Io { path: dir.to_owned(), source }))?;
    Ok(Some(WriteGuard { _writes: writes, _files: files }))
}

/// Removes from `dir` the temporary files of writers killed before their rename, and every
/// `*.<extension>` file that `stale` condemns (its namespace erased after what it covers, or
/// unreadable). An absent directory holds nothing.
pub(crate) fn reconcile(
    dir: &Path,
    extension: &str,
    mut stale: impl FnMut(&Path) -> Result<bool, OpenError>,
) -> Result<(), OpenError> {
    let io = |path: &Path, source| OpenError::IndexFile {
        source: IndexFileError::Io { path: path.to_owned(), source },
    };
    remove_abandoned_temporaries(dir).map_err(|source| OpenError::IndexFile { source })?;
    let entries = match fs_err::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(io(dir, source)),
    };
    for entry in entries {
        let path = entry.map_err(|source| io(dir, source))?.path();
        if path.extension().is_none_or(|e| e != extension) {
            continue;
        }
        if stale(&path)? {
            remove_index_file(&path).map_err(|source| OpenError::IndexFile { source })?;
        }
    }
    Ok(())
}
