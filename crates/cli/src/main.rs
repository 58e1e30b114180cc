//! The `evicortex` command-line tool: parse the arguments, call the `evicortex` library, render.
//!
//! Exit codes: 0 ok; 1 unexpected/internal; 2 bad input or usage (conflicts included); 3 I/O
//! failure; 4 integrity failure; 5 required model missing. See `exit.rs`. A closed standard
//! output changes none of them: see `stdout.rs`.
// `println!` panics on a closed stdout; commands write through `stdout::outln!`.
#![deny(clippy::print_stdout)]

mod args;
mod commands;
mod exit;
mod progress;
mod stdout;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    log_to_stderr();
    let store = cli.store.as_path();
    // One arm per subcommand; each command lives in `commands/<name>.rs`.
    let result = match &cli.command {
        Command::Ingest(args) => commands::ingest::run(store, args),
        Command::Verify(args) => commands::verify::run(store, args),
        Command::Migrate(args) => commands::migrate::run(store, args),
        Command::Erase(args) => commands::erase::run(store, args),
        Command::Stats(args) => commands::stats::run(store, args),
        Command::Export(args) => commands::export::run(store, args),
        Command::Model(args) => commands::model::run(args),
        Command::Embed(args) => commands::embed::run(store, args),
        Command::Encoders(args) => commands::encoders::run(store, args),
        Command::Compile(args) => commands::compile::run(store, args),
        Command::Answer(args) => commands::answer::run(store, args),
        Command::Serve(args) => commands::serve::run(store, args),
        Command::Mcp(args) => commands::mcp::run(store, args),
        Command::Keys(args) => commands::keys::run(store, args),
        Command::Eval(args) => commands::eval::run_eval(store, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The rule of every door: each cause once, not again where the message says it.
            eprintln!("error: {}", evicortex::front_end::error_chain(err.as_ref()));
            ExitCode::from(exit::code_for(&err))
        }
    }
}

/// Warnings and errors the library logs (a background embedding that failed, a namespace too
/// big for the index cache, a server request that failed) go to standard error; without a
/// subscriber they went nowhere. `EVICORTEX_LOG` sets the filter (`info`,
/// `evicortex=debug`...); the default is `warn`.
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EVICORTEX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
