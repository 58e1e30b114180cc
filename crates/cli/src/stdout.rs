//! Standard output that a reader going away cannot crash.
//!
//! `println!` panics when standard output is a pipe whose reader has exited
//! (`evicortex ingest … | head -1`), which would abandon an ingest between two batches. Every
//! command writes through [`outln!`] or [`stdout`] instead (`clippy::print_stdout` is denied in
//! this crate): once the reader has gone, output is dropped, the work goes on (an ingest commits
//! every batch, an export reads to the end) and the exit code is what it would have been. Any
//! other write failure is an I/O error (exit code 3). Output that must not be lost (a new key's
//! secret) is written with [`std::io::stdout`] and its failure handled where it is written.

use std::{
    io::{self, Write},
    sync::atomic::{AtomicBool, Ordering},
};

/// Set once a write found the reader gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes a line to standard output, dropping it once the reader has gone.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!($crate::stdout::stdout(), $($arg)*)
    }};
}
pub(crate) use outln;

/// Standard output, locked, dropping everything once its reader has gone.
#[derive(Debug)]
pub struct Stdout(io::StdoutLock<'static>);

/// Locks standard output.
pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

/// Whether standard output's reader has gone (what was written since then was dropped).
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if closed() {
            return Ok(buf.len());
        }
        match self.0.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if closed() {
            return Ok(());
        }
        match self.0.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                CLOSED.store(true, Ordering::Relaxed);
                Ok(())
            }
            other => other,
        }
    }
}
