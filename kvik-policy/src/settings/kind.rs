//! The kinds of setting values: how each is read from a `KVIKIO_*` variable
//! and shown to people. A setting names its kind once, in the declaration
//! table of `settings.rs`; parsing, `describe` and the error messages follow.
//!
//! Every kind ignores surrounding whitespace and refuses anything it cannot
//! read completely (KvikIO reads `KVIKIO_TASK_SIZE=4MiB` as 4 bytes; we read
//! it as 4 MiB, and `4x` is an error).

use crate::CompatMode;
use crate::size::{bytes_text, parse_size};

/// One kind of setting value.
pub(crate) trait Kind {
    type Value;
    /// Read a variable's text (the setting's own rule is checked after).
    fn parse(text: &str) -> Result<Self::Value, String>;
    /// The value for people, as `kvik settings` prints it.
    fn show(value: &Self::Value) -> String;
}

/// What a getter hands out for a stored value: a copy of small values, a
/// borrow of a list.
pub(crate) trait Get {
    type Out<'a>
    where
        Self: 'a;
    fn get(&self) -> Self::Out<'_>;
}

macro_rules! get_by_copy {
    ($($ty:ty),+) => {$(
        impl Get for $ty {
            type Out<'a> = $ty;
            fn get(&self) -> $ty {
                *self
            }
        }
    )+};
}
get_by_copy!(CompatMode, bool, usize, u64);

impl Get for Vec<u16> {
    type Out<'a> = &'a [u16];
    fn get(&self) -> &[u16] {
        self
    }
}

/// `on/true/yes/1`, `off/false/no/0`, `auto`, any case (KvikIO's table).
#[derive(Debug)]
pub(crate) struct Compat;

impl Kind for Compat {
    type Value = CompatMode;
    fn parse(text: &str) -> Result<CompatMode, String> {
        text.parse::<CompatMode>()
            .map_err(|_| "expected on/true/yes/1, off/false/no/0 or auto (any case)".to_string())
    }
    fn show(value: &CompatMode) -> String {
        value.to_string()
    }
}

/// KvikIO's booleans: `true/on/yes/1` and `false/off/no/0`, any case.
#[derive(Debug)]
pub(crate) struct Flag;

impl Kind for Flag {
    type Value = bool;
    fn parse(text: &str) -> Result<bool, String> {
        parse_bool(text)
    }
    fn show(value: &bool) -> String {
        value.to_string()
    }
}

/// A whole number of things (threads, attempts): digits only.
#[derive(Debug)]
pub(crate) struct Count;

impl Kind for Count {
    type Value = usize;
    fn parse(text: &str) -> Result<usize, String> {
        let n = parse_whole(text)?;
        usize::try_from(n).map_err(|_| "too large".to_string())
    }
    fn show(value: &usize) -> String {
        value.to_string()
    }
}

/// A size in bytes: plain bytes as KvikIO, or with a unit (`4MiB`).
#[derive(Debug)]
pub(crate) struct Bytes;

impl Kind for Bytes {
    type Value = u64;
    fn parse(text: &str) -> Result<u64, String> {
        parse_size(text).map_err(|e| {
            format!(
                "{} (write bytes like 4194304, or 4MiB, 16KiB, 1GiB)",
                e.problem
            )
        })
    }
    fn show(value: &u64) -> String {
        bytes_text(*value)
    }
}

/// Whole seconds: digits only.
#[derive(Debug)]
pub(crate) struct Seconds;

impl Kind for Seconds {
    type Value = u64;
    fn parse(text: &str) -> Result<u64, String> {
        parse_whole(text)
    }
    fn show(value: &u64) -> String {
        match value {
            1 => "1 second".into(),
            n => format!("{n} seconds"),
        }
    }
}

/// HTTP status codes as KvikIO reads `KVIKIO_HTTP_STATUS_CODES`: one or
/// more three-digit codes separated by commas, spaces allowed around each
/// (`429, 500`). Whether each is a status code HTTP defines is the
/// setting's rule.
#[derive(Debug)]
pub(crate) struct StatusCodes;

impl Kind for StatusCodes {
    type Value = Vec<u16>;
    fn parse(text: &str) -> Result<Vec<u16>, String> {
        text.split(',')
            .map(|code| {
                let code = code.trim();
                if code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) {
                    Ok(code.parse::<u16>().expect("three digits fit a u16"))
                } else {
                    Err(
                        "expected three-digit HTTP status codes separated by commas, \
                         like 429,500,503"
                            .to_string(),
                    )
                }
            })
            .collect()
    }
    fn show(value: &Vec<u16>) -> String {
        if value.is_empty() {
            return "none".into();
        }
        value
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// KvikIO's booleans: `true/on/yes/1` and `false/off/no/0`, any case,
/// surrounding whitespace ignored.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err("expected true/on/yes/1 or false/off/no/0".into()),
    }
}

/// Digits only (no sign, no `0x`, no exponent), surrounding whitespace ignored.
fn parse_whole(text: &str) -> Result<u64, String> {
    let digits = text.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a whole number (digits only)".into());
    }
    digits.parse::<u64>().map_err(|_| "too large".into())
}

/// A setting's rule, checked after parsing a variable and by its setter:
/// what is wrong, or `Ok`.
pub(crate) type Rule<T> = fn(&T) -> Result<(), &'static str>;

// The rules.

/// Greater than zero.
pub(crate) fn positive<T: PartialEq + Default>(value: &T) -> Result<(), &'static str> {
    if *value == T::default() {
        return Err("must be greater than 0");
    }
    Ok(())
}

/// From 1 to [`super::MAX_THREADS`].
pub(crate) fn thread_count(threads: &usize) -> Result<(), &'static str> {
    positive(threads)?;
    if *threads > super::MAX_THREADS {
        return Err("too large: at most 1024 threads");
    }
    Ok(())
}

/// Every code one HTTP defines (100 to 599).
#[allow(clippy::ptr_arg)] // a `Rule<Vec<u16>>`: it takes what the setting stores
pub(crate) fn http_status_codes(codes: &Vec<u16>) -> Result<(), &'static str> {
    if codes.iter().any(|code| !(100..=599).contains(code)) {
        return Err("HTTP status codes are from 100 to 599");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_read_as_kvikio_reads_them() {
        for text in [
            "429,500",
            "429, 500",
            " 429,500",
            "429,  500",
            "429 ,500",
            "429,500 ",
        ] {
            assert_eq!(StatusCodes::parse(text), Ok(vec![429, 500]), "{text:?}");
        }
        for text in [
            "429,", ",429", "a,b", "429,,500", "429,1000", "", "42", "+429",
        ] {
            assert!(StatusCodes::parse(text).is_err(), "{text:?}");
        }
        assert_eq!(StatusCodes::show(&vec![429, 503]), "429,503");
        assert_eq!(
            StatusCodes::parse("429,503")
                .map(|v| StatusCodes::show(&v))
                .unwrap(),
            "429,503"
        );
    }

    #[test]
    fn rules_name_what_is_wrong() {
        assert_eq!(positive(&0u64), Err("must be greater than 0"));
        assert_eq!(positive(&1usize), Ok(()));
        assert_eq!(thread_count(&1025), Err("too large: at most 1024 threads"));
        assert_eq!(thread_count(&super::super::MAX_THREADS), Ok(()));
        assert!(http_status_codes(&vec![429, 600]).is_err());
        assert!(http_status_codes(&vec![100, 599]).is_ok());
        assert_eq!(
            Count::parse("4 threads"),
            Err("expected a whole number (digits only)".into())
        );
        assert_eq!(
            Count::parse("18446744073709551616"),
            Err("too large".into())
        );
        assert_eq!(Seconds::show(&60), "60 seconds");
    }
}
