//! Support for kvik-rs's cross-crate tests.

use std::io::Write as _;

/// Say on the terminal (past the test harness's output capture) that a test
/// did not run and why. A skipped test must never look like a passing one.
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
}
