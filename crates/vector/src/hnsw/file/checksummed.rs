//! Checksummed files written atomically: a temporary file, synced and renamed into place, ending
//! in the blake3 checksum of its body; and the cleanup of temporaries a killed writer left.

use std::{
    io::{BufWriter, Read, Write},
    path::Path,
};

use super::IndexFileError;

/// How the temporary files of [`write_index_file`] end (they start with a dot).
const TEMPORARY_SUFFIX: &str = ".tmp";

/// Removes the temporary files in `dir` that a writer killed before its rename left behind
/// (each holds a copy of vectors, erased ones possibly included, and the index's size on disk);
/// returns how many. A temporary file whose lock is held belongs to a live writer and is kept.
/// A writer that has created its file but not yet locked it (a few instructions) could lose
/// its file here; its save then fails with an I/O error and nothing is corrupted.
// std's error kind tells a missing folder apart; the errors returned name the path.
#[allow(clippy::disallowed_methods)]
pub fn remove_abandoned_temporaries(dir: &Path) -> Result<usize, IndexFileError> {
    let io = |path: &Path, source| IndexFileError::Io { path: path.to_owned(), source };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(io(dir, source)),
    };
    let mut removed = 0;
    for entry in entries {
        let path = entry.map_err(|source| io(dir, source))?.path();
        let temporary = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.') && n.ends_with(TEMPORARY_SUFFIX));
        if !temporary {
            continue;
        }
        let file = match fs_open(&path) {
            Ok(file) => file,
            // Its writer renamed it into place meanwhile.
            Err(IndexFileError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(err) => return Err(err),
        };
        match file.try_lock() {
            Ok(()) => {
                if remove_index_file(&path)? {
                    removed += 1;
                }
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(source)) => return Err(io(&path, source)),
        }
    }
    Ok(removed)
}

/// Removes the index file at `path` (and makes the removal durable); `false` if there was none.
// std's error kind tells a missing file apart; the error returned names the path.
#[allow(clippy::disallowed_methods)]
pub fn remove_index_file(path: &Path) -> Result<bool, IndexFileError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            sync_parent(path)?;
            Ok(true)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(IndexFileError::Io { path: path.to_owned(), source }),
    }
}

/// Writes the bytes `body` produces, then their blake3 checksum, to `path` atomically: a
/// temporary file in the same directory (`.<extension>-*.tmp`, locked while written), synced,
/// renamed over `path`, the directory synced. Returns the bytes written, checksum included.
/// Read such a file back through a [`ChecksumReader`].
pub fn write_index_file(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<u64, IndexFileError> {
    let io = |source| IndexFileError::Io { path: path.to_owned(), source };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("index");
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{extension}-"))
        .suffix(TEMPORARY_SUFFIX)
        .tempfile_in(dir)
        .map_err(|source| IndexFileError::Io { path: dir.to_owned(), source })?;
    // Held until the file is renamed into place and closed: a temporary file nobody holds
    // the lock of was left by a writer that died, and the next open removes it
    // (`remove_abandoned_temporaries`).
    tmp.as_file()
        .lock()
        .map_err(|source| IndexFileError::Io { path: tmp.path().to_owned(), source })?;
    let bytes = {
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, tmp.as_file_mut()));
        body(&mut out).map_err(io)?;
        let (bytes, digest, mut inner) = out.finish();
        inner.write_all(digest.as_bytes()).map_err(io)?;
        inner.flush().map_err(io)?;
        bytes + 32
    };
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    sync_parent(path)?;
    Ok(bytes)
}

/// Reads a file written by [`write_index_file`], buffered, hashing what is read so that
/// [`ChecksumReader::finish`] can compare it with the stored checksum. Reads of a few bytes
/// cost a copy: the hash is taken over whole buffers, not per read.
#[derive(Debug)]
pub struct ChecksumReader<R> {
    inner: R,
    hasher: blake3::Hasher,
    buf: Box<[u8]>,
    /// `buf[pos..end]` is read from `inner` and not yet consumed; `buf[..pos]` is consumed,
    /// and hashed up to `hashed`.
    pos: usize,
    end: usize,
    hashed: usize,
}

impl<R: Read> ChecksumReader<R> {
    /// Reads `inner` from its first byte.
    pub fn new(inner: R) -> ChecksumReader<R> {
        ChecksumReader {
            inner,
            hasher: blake3::Hasher::new(),
            buf: vec![0u8; 1 << 20].into_boxed_slice(),
            pos: 0,
            end: 0,
            hashed: 0,
        }
    }

    fn hash_consumed(&mut self) {
        self.hasher.update(&self.buf[self.hashed..self.pos]);
        self.hashed = self.pos;
    }

    /// After the body has been read: checks the checksum that follows it and that nothing
    /// follows the checksum; the inner error names what is wrong.
    pub fn finish(mut self) -> std::io::Result<Result<(), String>> {
        self.hash_consumed();
        let computed = self.hasher.finalize();
        let mut stored = [0u8; 32];
        let mut raw = RawReader(&mut self);
        match raw.read_exact(&mut stored) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(Err("truncated".to_owned()));
            }
            Err(e) => return Err(e),
        }
        if stored != *computed.as_bytes() {
            return Ok(Err("checksum mismatch".to_owned()));
        }
        let mut extra = [0u8; 1];
        Ok(match raw.read(&mut extra)? {
            0 => Ok(()),
            _ => Err("bytes after the checksum".to_owned()),
        })
    }

    /// Copies buffered bytes into `out`, refilling the buffer when it is empty.
    fn copy_out(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.end {
            self.hash_consumed();
            self.end = self.inner.read(&mut self.buf)?;
            (self.pos, self.hashed) = (0, 0);
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl<R: Read> Read for ChecksumReader<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.copy_out(out)
    }
}

/// Reads the checksum's bytes past what was hashed (they are not part of the hash).
struct RawReader<'a, R>(&'a mut ChecksumReader<R>);

impl<R: Read> Read for RawReader<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.copy_out(out)?;
        self.0.hashed = self.0.pos;
        Ok(n)
    }
}
struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W) -> HashingWriter<W> {
        HashingWriter { inner, hasher: blake3::Hasher::new(), bytes: 0 }
    }

    fn finish(self) -> (u64, blake3::Hash, W) {
        (self.bytes, self.hasher.finalize(), self.inner)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

// The error returned names the path.
#[allow(clippy::disallowed_methods)]
pub(super) fn fs_open(path: &Path) -> Result<std::fs::File, IndexFileError> {
    std::fs::File::open(path).map_err(|source| IndexFileError::Io { path: path.to_owned(), source })
}

// The error returned names the directory.
#[allow(clippy::disallowed_methods)]
fn sync_parent(path: &Path) -> Result<(), IndexFileError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| IndexFileError::Io { path: dir.to_owned(), source })
}
