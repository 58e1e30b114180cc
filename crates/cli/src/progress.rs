//! Progress bars: shown on a terminal, hidden when stderr is piped or redirected.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `what`; hidden unless stderr is a terminal.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

/// A bar over work counted in tokens, with a message of the caller's (rates, counts); hidden
/// unless stderr is a terminal.
pub fn tokens_bar(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:40}}] {{percent:>3}}% of tokens, {{msg}}, eta {{eta}}"
        ))
        .expect("static template")
        .progress_chars("=> "),
    );
    bar
}

/// A spinner labelled `what` for work of unknown length; hidden unless stderr is a terminal.
pub fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    spinner.set_message(what.to_owned());
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner
}
