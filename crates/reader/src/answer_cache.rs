//! `AnswerCache`: answers stored by (reader identity, prompt digest, decoding settings), so an
//! interrupted evaluation resumes without reading any prompt twice. One SQLite file; every put
//! is its own durable transaction. [`AnswerCache::export_jsonl`] and
//! [`AnswerCache::import_jsonl`] carry answers between machines as text lines (a long run
//! spread over several machines commits its answers and resumes from them).

use std::{
    io::{BufRead as _, Write as _},
    path::{Path, PathBuf},
    sync::Mutex,
};

use rusqlite::{Connection, OptionalExtension as _, params};

use crate::{
    answer::{Answer, answer},
    decoding::DecodingSettings,
    error::{AnswerCacheError, ReadError},
    prompt::AnswerPrompt,
    reader::Reader,
};

/// What identifies an answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AnswerKey {
    /// [`crate::ReaderIdentity::digest`].
    pub reader: String,
    /// [`AnswerPrompt::digest`].
    pub prompt: String,
    /// [`DecodingSettings::cache_key`].
    pub decoding: String,
}

impl AnswerKey {
    /// The key of `prompt` read by `reader` with `decoding`.
    pub fn new(
        reader: &dyn Reader,
        prompt: &AnswerPrompt,
        decoding: &DecodingSettings,
    ) -> AnswerKey {
        AnswerKey {
            reader: reader.identity().digest(),
            prompt: prompt.digest(),
            decoding: decoding.cache_key(),
        }
    }
}

impl std::fmt::Display for AnswerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "reader {} prompt {} {}", &self.reader[..16], &self.prompt[..16], self.decoding)
    }
}

/// A persistent answer cache.
#[derive(Debug)]
pub struct AnswerCache {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// One exported answer: a line of [`AnswerCache::export_jsonl`]'s file.
#[derive(serde::Serialize, serde::Deserialize)]
struct ExportedAnswer {
    reader: String,
    prompt: String,
    decoding: String,
    answer: Answer,
}

type Row = (String, String, String, String);

/// Every cached row, in key order.
fn all_rows(conn: &Connection) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(
        "SELECT reader, prompt, decoding, answer FROM answers ORDER BY reader, prompt, decoding",
    )?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
}

/// Whether [`AnswerCache::answer`] read the prompt or found it cached.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Found in the cache.
    Hit,
    /// Read now and stored.
    Miss,
}

/// Reading through the cache failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CachedReadError {
    /// The reader failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The cache failed.
    #[error(transparent)]
    Cache(#[from] AnswerCacheError),
}

impl AnswerCache {
    /// Opens (creating it and its folder if needed) the cache at `path`.
    pub fn open(path: &Path) -> Result<AnswerCache, AnswerCacheError> {
        let sqlite = |source| AnswerCacheError::Sqlite { path: path.to_owned(), source };
        // A cache is often carried to a new machine before the run that makes its store there.
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs_err::create_dir_all(folder)
                .map_err(|source| AnswerCacheError::Io { path: path.to_owned(), source })?;
        }
        let conn = Connection::open(path).map_err(sqlite)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS answers (
                 reader TEXT NOT NULL,
                 prompt TEXT NOT NULL,
                 decoding TEXT NOT NULL,
                 answer TEXT NOT NULL,
                 PRIMARY KEY (reader, prompt, decoding)
             ) WITHOUT ROWID;",
        )
        .map_err(sqlite)?;
        Ok(AnswerCache { path: path.to_owned(), conn: Mutex::new(conn) })
    }

    /// The cached answer for `key`, if any.
    pub fn get(&self, key: &AnswerKey) -> Result<Option<Answer>, AnswerCacheError> {
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let json: Option<String> = conn
            .query_row(
                "SELECT answer FROM answers WHERE reader = ?1 AND prompt = ?2 AND decoding = ?3",
                params![key.reader, key.prompt, key.decoding],
                |row| row.get(0),
            )
            .optional()
            .map_err(|source| AnswerCacheError::Sqlite { path: self.path.clone(), source })?;
        json.map(|json| {
            serde_json::from_str(&json).map_err(|e| AnswerCacheError::Corrupted {
                path: self.path.clone(),
                key: key.to_string(),
                reason: e.to_string(),
            })
        })
        .transpose()
    }

    /// Stores `answer` under `key`; a key already stored keeps its first answer.
    pub fn put(&self, key: &AnswerKey, answer: &Answer) -> Result<(), AnswerCacheError> {
        let json = serde_json::to_string(answer).expect("answers serialise");
        let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        conn.execute(
            "INSERT OR IGNORE INTO answers (reader, prompt, decoding, answer) \
             VALUES (?1, ?2, ?3, ?4)",
            params![key.reader, key.prompt, key.decoding, json],
        )
        .map_err(|source| AnswerCacheError::Sqlite { path: self.path.clone(), source })?;
        Ok(())
    }

    /// Writes every cached answer to `path` (created or replaced), one JSON object per line in
    /// key order, and returns how many.
    pub fn export_jsonl(&self, path: &Path) -> Result<usize, AnswerCacheError> {
        let io = |source| AnswerCacheError::Io { path: path.to_owned(), source };
        let rows = {
            let conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            all_rows(&conn)
                .map_err(|source| AnswerCacheError::Sqlite { path: self.path.clone(), source })?
        };
        let tmp = path.with_extension("jsonl.partial");
        let mut out = std::io::BufWriter::new(fs_err::File::create(&tmp).map_err(io)?);
        for (reader, prompt, decoding, json) in &rows {
            let key = AnswerKey {
                reader: reader.clone(),
                prompt: prompt.clone(),
                decoding: decoding.clone(),
            };
            let answer: Answer =
                serde_json::from_str(json).map_err(|e| AnswerCacheError::Corrupted {
                    path: self.path.clone(),
                    key: key.to_string(),
                    reason: e.to_string(),
                })?;
            let line = ExportedAnswer {
                reader: key.reader,
                prompt: key.prompt,
                decoding: key.decoding,
                answer,
            };
            serde_json::to_writer(&mut out, &line).expect("answers serialise");
            out.write_all(b"\n").map_err(io)?;
        }
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        fs_err::rename(&tmp, path).map_err(io)?;
        Ok(rows.len())
    }

    /// Adds the answers of a file [`AnswerCache::export_jsonl`] wrote; a key already cached keeps
    /// its answer. Returns how many lines the file held. A line that does not decode fails the
    /// whole import, naming its line number, before anything is stored.
    pub fn import_jsonl(&self, path: &Path) -> Result<usize, AnswerCacheError> {
        let io = |source| AnswerCacheError::Io { path: path.to_owned(), source };
        let file = std::io::BufReader::new(fs_err::File::open(path).map_err(io)?);
        let mut lines = Vec::new();
        for (n, line) in file.lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            let parsed: ExportedAnswer =
                serde_json::from_str(&line).map_err(|e| AnswerCacheError::BadImportLine {
                    path: path.to_owned(),
                    line: n + 1,
                    reason: e.to_string(),
                })?;
            lines.push(parsed);
        }
        let mut conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let sqlite = |source| AnswerCacheError::Sqlite { path: self.path.clone(), source };
        let tx = conn.transaction().map_err(sqlite)?;
        for line in &lines {
            let json = serde_json::to_string(&line.answer).expect("answers serialise");
            tx.execute(
                "INSERT OR IGNORE INTO answers (reader, prompt, decoding, answer) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![line.reader, line.prompt, line.decoding, json],
            )
            .map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        Ok(lines.len())
    }

    /// The cached answer, or [`answer`] now and cache it.
    pub fn answer(
        &self,
        reader: &dyn Reader,
        prompt: &AnswerPrompt,
        decoding: &DecodingSettings,
    ) -> Result<(Answer, CacheOutcome), CachedReadError> {
        let key = AnswerKey::new(reader, prompt, decoding);
        if let Some(found) = self.get(&key)? {
            return Ok((found, CacheOutcome::Hit));
        }
        let fresh = answer(reader, prompt, decoding)?;
        self.put(&key, &fresh)?;
        Ok((fresh, CacheOutcome::Miss))
    }
}
