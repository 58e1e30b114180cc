//! `GET /v1/namespaces/{ns}/export`: the facade's export of one namespace, streamed as
//! `{"namespace": NS, "turns": [LINE, ...]}`, where each `LINE` is a line of `evicortex export`
//! byte for byte (the same `Memory::export` writes both).
//!
//! The store is read on the blocking pool at the store's pace, never the client's: the read
//! snapshot is released as soon as the last turn is read, whatever the network does. A snapshot
//! held open while a slow client downloads would make an erasure's scrub wait for it (the WAL
//! checkpoint waits for readers) with the writer connection held, stalling appends. Chunks are
//! queued without bound meanwhile, so a slow client costs memory up to the namespace's size, as
//! the other whole-namespace reads (stats, sessions) do.

use std::io::{self, Write};

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use evicortex::{Memory, Namespace};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::{ApiError, AppState, facade_error};

/// Bytes gathered before a chunk is sent. A namespace smaller than this is read completely
/// before the response starts, so any failure reading it is a proper error status.
const CHUNK_BYTES: usize = 64 * 1024;

/// The response streaming `namespace`'s export. A failure before the first chunk is an error
/// response; one after it aborts the body, so a client never takes a cut-off export for a
/// complete one.
pub async fn export_response(state: &AppState, namespace: Namespace) -> Result<Response, ApiError> {
    let (sender, mut receiver) = unbounded_channel();
    let memory = std::sync::Arc::clone(state.memory());
    tokio::task::spawn_blocking(move || export_into(&memory, &namespace, sender));
    let first = match receiver.recv().await {
        Some(first) => first?,
        None => {
            return Err(ApiError::Storage { message: "the export task ended early".to_owned() });
        }
    };
    let rest = futures_util::stream::unfold(receiver, next_chunk);
    let body = Body::from_stream(futures_util::StreamExt::chain(
        futures_util::stream::iter([Ok::<_, ApiError>(first)]),
        rest,
    ));
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn next_chunk(
    mut receiver: UnboundedReceiver<Result<Bytes, ApiError>>,
) -> Option<(Result<Bytes, ApiError>, UnboundedReceiver<Result<Bytes, ApiError>>)> {
    let chunk = receiver.recv().await?;
    if let Err(e) = &chunk {
        tracing::warn!(error = %e, "export failed after the response started; aborting the body");
    }
    Some((chunk, receiver))
}

/// Runs the facade's export into `sender`; the last message is the closing bytes or the error.
fn export_into(
    memory: &Memory,
    namespace: &Namespace,
    sender: UnboundedSender<Result<Bytes, ApiError>>,
) {
    let mut body = JsonTurnsWriter::new(namespace, sender);
    match memory.export(Some(namespace), &mut body) {
        Ok(_) => body.finish(),
        // The client went away: nobody is left to tell.
        Err(evicortex::ExportError::Write(_)) if body.sender.is_closed() => {}
        Err(e) => {
            body.sender.send(Err(facade_error(&e))).ok();
        }
    }
}

/// Rewrites JSONL (one JSON object per line, as `Memory::export` writes it) into the elements of
/// the `turns` array. A raw newline only ever ends a line: JSON escapes it inside strings.
struct JsonTurnsWriter {
    sender: UnboundedSender<Result<Bytes, ApiError>>,
    buffer: Vec<u8>,
    /// A line has ended: the next one is preceded by a comma.
    line_ended: bool,
}

impl JsonTurnsWriter {
    fn new(namespace: &Namespace, sender: UnboundedSender<Result<Bytes, ApiError>>) -> Self {
        let name = serde_json::to_string(namespace.as_str()).expect("a string always serialises");
        let buffer = format!("{{\"namespace\":{name},\"turns\":[").into_bytes();
        JsonTurnsWriter { sender, buffer, line_ended: false }
    }

    fn send_buffer(&mut self) -> io::Result<()> {
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.sender
            .send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }

    fn finish(mut self) {
        self.buffer.extend_from_slice(b"]}");
        // A client that went away needs no ending.
        self.send_buffer().ok();
    }
}

impl Write for JsonTurnsWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let (content, ends_line) = match piece.strip_suffix(b"\n") {
                Some(content) => (content, true),
                None => (piece, false),
            };
            if !content.is_empty() {
                if self.line_ended {
                    self.buffer.push(b',');
                    self.line_ended = false;
                }
                self.buffer.extend_from_slice(content);
            }
            self.line_ended |= ends_line;
        }
        if self.buffer.len() >= CHUNK_BYTES {
            self.send_buffer()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(writes: &[&str], expect: &str) {
        let (sender, mut receiver) = unbounded_channel();
        let namespace = Namespace::new("alice").expect("valid namespace");
        let mut writer = JsonTurnsWriter::new(&namespace, sender);
        for w in writes {
            writer.write_all(w.as_bytes()).expect("write");
        }
        writer.finish();
        let mut out = Vec::new();
        while let Ok(chunk) = receiver.try_recv() {
            out.extend_from_slice(&chunk.expect("no error"));
        }
        assert_eq!(String::from_utf8(out).expect("utf-8"), expect);
    }

    #[test]
    fn jsonl_lines_become_array_elements_however_the_writes_split_them() {
        check(&[], r#"{"namespace":"alice","turns":[]}"#);
        check(&["{\"a\":1}", "\n"], r#"{"namespace":"alice","turns":[{"a":1}]}"#);
        check(
            &["{\"a\":1}\n{\"b\":\"x\\ny\"}\n"],
            r#"{"namespace":"alice","turns":[{"a":1},{"b":"x\ny"}]}"#,
        );
        check(
            &["{\"a\"", ":1}\n{", "\"b\":2}", "\n"],
            r#"{"namespace":"alice","turns":[{"a":1},{"b":2}]}"#,
        );
    }
}
