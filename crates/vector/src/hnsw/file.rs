//! HNSW index files: the graph with its vectors, the namespace and encoder they belong to and the
//! ledger position they cover, written atomically and checked on load. Layout in
//! `docs/vector-index.md`.

mod checksummed;

use std::{
    io::{BufReader, Read, Write},
    path::{Path, PathBuf},
};

use evicortex_core::{Namespace, TurnId};

use super::{
    HnswIndex, HnswParams,
    graph::{Graph, MAX_LEVEL, NO_ROW},
};
use crate::{ExactIndex, IndexKey, VectorIndex, VectorIndexRead};

use self::checksummed::fs_open;
pub use self::checksummed::{
    ChecksumReader, remove_abandoned_temporaries, remove_index_file, write_index_file,
};

/// The first bytes of every index file.
pub const INDEX_FILE_MAGIC: [u8; 8] = *b"EVXHNSW\0";

/// The layout version this build writes and reads. Version 2: keys and the covered position
/// are record numbers within the namespace (ledger format 3); a version-1 file keyed by ledger
/// positions is stale and rebuilt.
pub const INDEX_FILE_VERSION: u32 = 2;

/// The largest vector dimension a file is read with (encoders have at most a few thousand): a
/// damaged dimension must not size the buffers the vectors are read into.
const MAX_FILE_DIM: usize = 1 << 16;

/// What an index file is derived from: checked before it is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexFileMeta {
    /// The namespace whose turns the vectors embed.
    pub namespace: Namespace,
    /// The digest of the encoder identity the vectors were produced under.
    pub encoder: [u8; 32],
}

/// An index file's header: enough to decide whether the file is current without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexFileHeader {
    /// Namespace and encoder.
    pub meta: IndexFileMeta,
    /// The graph's parameters.
    pub params: HnswParams,
    /// Vector dimension.
    pub dim: usize,
    /// Rows (vectors).
    pub rows: usize,
    /// The ledger position the index is complete up to.
    pub covers: Option<TurnId>,
}

/// Whether an index file can serve a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexFileState {
    /// No file.
    Missing,
    /// The file answers for other data or settings, or predates an erasure: remove and rebuild.
    Stale {
        /// Why.
        reason: String,
    },
    /// The file is current up to `header.covers`; turns appended after it are added on load.
    Current {
        /// Its header.
        header: IndexFileHeader,
    },
}

/// Why an index file could not be written, read or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexFileError {
    /// The file system failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a well-formed index file of this version and key type.
    #[error("{path}: not a usable vector index file: {detail}")]
    Corrupted {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// The file name for `namespace`'s index under `encoder`: hashes only, so names reveal no
/// namespace.
pub fn index_file_name(namespace: &Namespace, encoder: &[u8; 32]) -> String {
    format!("{}{}.hnsw", index_file_prefix(namespace), hex(&encoder[..8]))
}

/// The start of the file name of every index of `namespace`, whatever the encoder (erasure
/// removes them all).
pub fn index_file_prefix(namespace: &Namespace) -> String {
    let ns = blake3::hash(namespace.as_str().as_bytes());
    format!("{}-", hex(&ns.as_bytes()[..16]))
}

/// Decides whether the file at `path` can serve `expected` with `params`, given the ledger
/// position of the namespace's last erasure (`None`: never erased). An index built before an
/// erasure may hold erased vectors and is stale, whatever it covers.
pub fn index_file_state(
    path: &Path,
    expected: &IndexFileMeta,
    params: &HnswParams,
    last_erasure: Option<TurnId>,
) -> Result<IndexFileState, IndexFileError> {
    let header = match read_index_header(path) {
        Ok(header) => header,
        Err(IndexFileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(IndexFileState::Missing);
        }
        Err(IndexFileError::Corrupted { detail, .. }) => {
            return Ok(IndexFileState::Stale { reason: detail });
        }
        Err(err) => return Err(err),
    };
    let stale = |reason: String| Ok(IndexFileState::Stale { reason });
    if header.meta.namespace != expected.namespace {
        return stale(format!("built for namespace {:?}", header.meta.namespace.as_str()));
    }
    if header.meta.encoder != expected.encoder {
        return stale(format!("built under encoder identity {}", hex(&header.meta.encoder)));
    }
    if header.params != *params {
        return stale(format!("built with {:?}", header.params));
    }
    match (header.covers, last_erasure) {
        (None, _) => stale("records no ledger position".to_owned()),
        (Some(covers), Some(erased)) if erased > covers => {
            stale(format!("covers {covers}, before the erasure recorded at {erased}"))
        }
        _ => Ok(IndexFileState::Current { header }),
    }
}

/// Reads an index file's header.
pub fn read_index_header(path: &Path) -> Result<IndexFileHeader, IndexFileError> {
    let file = fs_open(path)?;
    let mut reader = FileReader::new(path, BufReader::new(file));
    reader.header()
}

impl<K: IndexKey> HnswIndex<K> {
    /// Writes the index to `path` atomically (see [`write_index_file`]); returns the bytes
    /// written. The index must record the ledger position it covers.
    pub fn save(&self, path: &Path, meta: &IndexFileMeta) -> Result<u64, IndexFileError> {
        write_index_file(path, |out| self.write_body(out, meta))
    }

    fn write_body(&self, out: &mut dyn Write, meta: &IndexFileMeta) -> std::io::Result<()> {
        let exact = self.exact();
        let graph = self.graph();
        let params = self.params();
        out.write_all(&INDEX_FILE_MAGIC)?;
        out.write_all(&INDEX_FILE_VERSION.to_le_bytes())?;
        out.write_all(&[K::TAG])?;
        out.write_all(&(exact.dim() as u32).to_le_bytes())?;
        out.write_all(&(exact.len() as u64).to_le_bytes())?;
        out.write_all(&(params.m as u32).to_le_bytes())?;
        out.write_all(&(params.ef_construction as u32).to_le_bytes())?;
        out.write_all(&(params.ef_search as u32).to_le_bytes())?;
        out.write_all(&params.seed.to_le_bytes())?;
        match exact.covers() {
            Some(covers) => {
                out.write_all(&[1])?;
                out.write_all(&covers.raw().to_le_bytes())?;
            }
            None => out.write_all(&[0; 9])?,
        }
        out.write_all(&meta.encoder)?;
        let ns = meta.namespace.as_str().as_bytes();
        out.write_all(&(ns.len() as u32).to_le_bytes())?;
        out.write_all(ns)?;
        let mut buf = Vec::with_capacity(K::BYTES * 4096);
        for keys in exact.row_map().keys().chunks(4096) {
            buf.clear();
            for key in keys {
                key.encode(&mut buf);
            }
            out.write_all(&buf)?;
        }
        for chunk in exact.unit_vectors().chunks(1 << 16) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
            out.write_all(&buf)?;
        }
        let rows = graph.rows() as u32;
        buf.clear();
        buf.extend((0..rows).map(|row| graph.level(row)));
        out.write_all(&buf)?;
        out.write_all(&graph.entry().unwrap_or(NO_ROW).to_le_bytes())?;
        for row in 0..rows {
            for layer in 0..=graph.level(row) {
                let links = graph.neighbors(row, layer);
                buf.clear();
                buf.push(links.len() as u8);
                buf.extend(links.iter().flat_map(|l| l.to_le_bytes()));
                out.write_all(&buf)?;
            }
        }
        Ok(())
    }

    /// Reads an index file, checking its checksum, its key type and every link; the header
    /// comes with it (compare it with what the store expects, or use [`index_file_state`]).
    pub fn load(path: &Path) -> Result<(IndexFileHeader, HnswIndex<K>), IndexFileError> {
        let file = fs_open(path)?;
        let mut reader = FileReader::new(path, BufReader::with_capacity(1 << 20, file));
        let header = reader.header()?;
        if reader.key_tag != K::TAG {
            return Err(reader.corrupted(format!(
                "holds keys of type {}, expected {}",
                reader.key_tag,
                K::TAG
            )));
        }
        let (rows, dim) = (header.rows, header.dim);
        // Grown as the keys are read: `rows` is what the file claims, not what it holds.
        let mut keys = Vec::with_capacity(rows.min(4096));
        let mut buf = vec![0u8; K::BYTES * 4096];
        let mut left = rows;
        while left > 0 {
            let take = left.min(4096);
            reader.read(&mut buf[..take * K::BYTES])?;
            keys.extend(buf[..take * K::BYTES].chunks_exact(K::BYTES).map(K::decode));
            left -= take;
        }
        let mut exact = ExactIndex::new(dim);
        let mut vector_bytes = vec![0u8; dim * 4];
        let mut vector = vec![0f32; dim];
        for key in keys {
            reader.read(&mut vector_bytes)?;
            for (x, b) in vector.iter_mut().zip(vector_bytes.chunks_exact(4)) {
                *x = f32::from_le_bytes(b.try_into().expect("4 bytes"));
            }
            let norm: f64 = vector.iter().map(|x| f64::from(*x).powi(2)).sum();
            if !vector.iter().all(|x| x.is_finite()) || (norm - 1.0).abs() > 1e-3 {
                return Err(reader.corrupted(format!("vector of {key:?} is not unit length")));
            }
            exact.insert_unit(key, &vector).map_err(|e| reader.corrupted(e.to_string()))?;
        }
        if let Some(covers) = header.covers {
            exact.mark_covered(covers).map_err(|e| reader.corrupted(e.to_string()))?;
        }
        let mut levels = vec![0u8; rows];
        reader.read(&mut levels)?;
        if let Some(level) = levels.iter().find(|&&l| l > MAX_LEVEL) {
            return Err(reader.corrupted(format!("level {level} above {MAX_LEVEL}")));
        }
        let entry = reader.u32()?;
        let mut graph = Graph::new(header.params.m);
        for &level in &levels {
            graph.push_row(level);
        }
        let mut links = Vec::new();
        for row in 0..rows as u32 {
            for layer in 0..=levels[row as usize] {
                let count = reader.u8()? as usize;
                if count > graph.capacity(layer) {
                    return Err(reader.corrupted(format!("row {row} has {count} links")));
                }
                links.clear();
                for _ in 0..count {
                    let to = reader.u32()?;
                    if to as usize >= rows || to == row || levels[to as usize] < layer {
                        return Err(reader.corrupted(format!("row {row} links to {to}")));
                    }
                    links.push(to);
                }
                graph.set_neighbors(row, layer, &links);
            }
        }
        match (rows, entry) {
            (0, NO_ROW) => {}
            (0, _) => return Err(reader.corrupted("entry point in an empty graph".to_owned())),
            (_, entry) if (entry as usize) < rows => {
                if levels.iter().any(|&l| l > levels[entry as usize]) {
                    return Err(reader.corrupted("entry point below the top level".to_owned()));
                }
                graph.set_entry(entry);
            }
            _ => return Err(reader.corrupted(format!("entry point {entry}"))),
        }
        reader.finish()?;
        let index = HnswIndex::from_parts(exact, header.params, graph);
        Ok((header, index))
    }
}

struct FileReader<'p, R> {
    path: &'p Path,
    inner: R,
    hasher: blake3::Hasher,
    key_tag: u8,
}

impl<'p, R: Read> FileReader<'p, R> {
    fn new(path: &'p Path, inner: R) -> FileReader<'p, R> {
        FileReader { path, inner, hasher: blake3::Hasher::new(), key_tag: 0 }
    }

    fn corrupted(&self, detail: String) -> IndexFileError {
        IndexFileError::Corrupted { path: self.path.to_owned(), detail }
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<(), IndexFileError> {
        self.inner.read_exact(buf).map_err(|source| match source.kind() {
            std::io::ErrorKind::UnexpectedEof => self.corrupted("truncated".to_owned()),
            _ => IndexFileError::Io { path: self.path.to_owned(), source },
        })?;
        self.hasher.update(buf);
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, IndexFileError> {
        let mut b = [0u8; 1];
        self.read(&mut b)?;
        Ok(b[0])
    }

    fn u32(&mut self) -> Result<u32, IndexFileError> {
        let mut b = [0u8; 4];
        self.read(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, IndexFileError> {
        let mut b = [0u8; 8];
        self.read(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn header(&mut self) -> Result<IndexFileHeader, IndexFileError> {
        let mut magic = [0u8; 8];
        self.read(&mut magic)?;
        if magic != INDEX_FILE_MAGIC {
            return Err(self.corrupted("wrong magic bytes".to_owned()));
        }
        let version = self.u32()?;
        if version != INDEX_FILE_VERSION {
            return Err(self.corrupted(format!(
                "layout version {version}, this build reads {INDEX_FILE_VERSION}"
            )));
        }
        self.key_tag = self.u8()?;
        let dim = self.u32()? as usize;
        let rows = usize::try_from(self.u64()?).map_err(|e| self.corrupted(e.to_string()))?;
        let m = self.u32()? as usize;
        let ef_construction = self.u32()? as usize;
        let ef_search = self.u32()? as usize;
        let seed = self.u64()?;
        let params = HnswParams { m, ef_construction, ef_search, seed };
        super::check_params(&params).map_err(|e| self.corrupted(e.to_string()))?;
        if dim == 0 || dim > MAX_FILE_DIM || rows > u32::MAX as usize {
            return Err(self.corrupted(format!("dimension {dim}, {rows} rows")));
        }
        let covers = match (self.u8()?, self.u64()?) {
            (0, _) => None,
            (1, raw) => Some(TurnId::from_raw(raw)),
            (flag, _) => return Err(self.corrupted(format!("coverage flag {flag}"))),
        };
        let mut encoder = [0u8; 32];
        self.read(&mut encoder)?;
        let len = self.u32()? as usize;
        if len > 4096 {
            return Err(self.corrupted(format!("namespace of {len} bytes")));
        }
        let mut ns = vec![0u8; len];
        self.read(&mut ns)?;
        let namespace = String::from_utf8(ns)
            .ok()
            .and_then(|ns| Namespace::new(&ns).ok())
            .ok_or_else(|| self.corrupted("invalid namespace".to_owned()))?;
        Ok(IndexFileHeader {
            meta: IndexFileMeta { namespace, encoder },
            params,
            dim,
            rows,
            covers,
        })
    }

    /// Checks the trailing checksum and that nothing follows it.
    fn finish(mut self) -> Result<(), IndexFileError> {
        let computed = self.hasher.finalize();
        let mut stored = [0u8; 32];
        self.inner.read_exact(&mut stored).map_err(|_| self.corrupted("truncated".to_owned()))?;
        if stored != *computed.as_bytes() {
            return Err(self.corrupted("checksum mismatch".to_owned()));
        }
        let mut extra = [0u8; 1];
        match self.inner.read(&mut extra) {
            Ok(0) => Ok(()),
            Ok(_) => Err(self.corrupted("bytes after the checksum".to_owned())),
            Err(source) => Err(IndexFileError::Io { path: self.path.to_owned(), source }),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
