//! Progress on a terminal only: a benchmark piped into a file prints its table and nothing else.

use std::{io::IsTerminal, time::Duration};

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `what`, hidden unless stderr is a terminal.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    shown(|| {
        let style = ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({eta})")
            .expect("static template");
        ProgressBar::new(len).with_style(style.progress_chars("=> ")).with_message(what.to_owned())
    })
}

/// A spinner labelled `what` for work of unknown length, hidden unless stderr is a terminal.
pub fn spinner(what: &str) -> ProgressBar {
    shown(|| {
        let spinner = ProgressBar::new_spinner().with_message(what.to_owned());
        spinner.enable_steady_tick(Duration::from_millis(120));
        spinner
    })
}

fn shown(make: impl FnOnce() -> ProgressBar) -> ProgressBar {
    if std::io::stderr().is_terminal() { make() } else { ProgressBar::hidden() }
}
