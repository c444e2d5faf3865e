//! Progress bars for long work: on stderr when it is a terminal and the
//! output is for people; never in `--json`, a pipe or a file.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `total` bytes, labelled `what`; hidden unless stderr is a
/// terminal and the output is not JSON.
pub fn bar(total: u64, what: &str, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}
