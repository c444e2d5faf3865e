//! `declare_settings!`: from one entry per setting, everything a setting
//! needs — the `Settings` field and its default, the getter, the setter (with
//! the setting's rule, when it has one), reading its `KVIKIO_*` variables
//! (aliases included), its line in [`SETTINGS`](super::SETTINGS) and in
//! `describe`, and its key in the serialized form.
//!
//! An entry:
//!
//! ```text
//! /// What the setting means (becomes the getter's documentation).
//! name: Type => GetterType {
//!     set: set_name,                       // the setter
//!     variables: ["KVIKIO_NAME", "KVIKIO_ALIAS"], // the main one, then aliases
//!     default: expression => "shown as",
//!     kind: Kind,                          // how text is read and shown (kind.rs)
//!     check: rule_fn,                      // optional: a kind::Rule<Type>
//!     rule: "what a valid value is, for people",
//!     example: "a valid value that is not the default",
//! }
//! ```
//!
//! A setting with a `check` gets a setter returning `Result<&mut Settings>`;
//! one without gets a setter that cannot fail, returning `&mut Settings`.

macro_rules! declare_settings {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $ty:ty => $out:ty {
            set: $set:ident,
            variables: [$main:literal $(, $alias:literal)*],
            default: $default:expr => $default_text:literal,
            kind: $kind:ty,
            $(check: $check:path,)?
            rule: $rule:literal,
            example: $example:literal $(,)?
        }
    )+) => {
        /// The effective KvikIO settings, each value kept with where it came
        /// from. Cheap to clone; every request takes a snapshot.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Settings {
            $($name: Setting<$ty>,)+
        }

        /// Every setting, in the order `kvik settings` prints them:
        ///
        /// | setting | environment | default | rule |
        /// |---|---|---|---|
        $(
            #[doc = concat!(
                "| [`", stringify!($name), "`](Settings::", stringify!($name), ") | `", $main, "`",
                $(" (alias `", $alias, "`)",)*
                " | ", $default_text, " | ", $rule, " |"
            )]
        )+
        pub const SETTINGS: &[SettingInfo] = &[$(
            SettingInfo {
                name: stringify!($name),
                variables: &[$main $(, $alias)*],
                default: $default_text,
                rule: $rule,
                example: $example,
            },
        )+];

        impl Default for Settings {
            /// Our defaults, ignoring the environment.
            fn default() -> Self {
                Settings {
                    $($name: Setting::default($default),)+
                }
            }
        }

        impl Settings {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!(
                    "Environment: `", $main, "`",
                    $(" (alias `", $alias, "`; set both and they must agree)",)*
                    "; default ", $default_text, "; ", $rule, "."
                )]
                pub fn $name(&self) -> $out {
                    kind::Get::get(&self.$name.value)
                }
            )+

            $(
                declare_settings!(@setter $name, $set, $ty, $kind, $rule $(, $check)?);
            )+

            /// Read settings from any source of variables (`lookup` returns a
            /// variable's value, `None` when unset). Every bad variable is
            /// reported, each with its value.
            pub fn from_vars(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Settings> {
                let mut settings = Settings::default();
                let mut problems = Vec::new();
                $(
                    let check = declare_settings!(@check $ty $(, $check)?);
                    if let Some(found) = read_variables::<$kind>(&[$main $(, $alias)*], &lookup, check, &mut problems) {
                        settings.$name = found;
                    }
                )+
                if problems.is_empty() {
                    Ok(settings)
                } else {
                    Err(Error::Environment { problems })
                }
            }

            /// Each setting with its value and source, in [`SETTINGS`] order.
            pub fn describe(&self) -> Vec<SettingView> {
                let values = [$(
                    (<$kind as kind::Kind>::show(&self.$name.value), self.$name.source),
                )+];
                SETTINGS
                    .iter()
                    .zip(values)
                    .map(|(info, (value, source))| SettingView {
                        name: info.name,
                        value,
                        source,
                        variables: info.variables,
                        default: info.default,
                        rule: info.rule,
                    })
                    .collect()
            }

            /// Which settings differ between `self` and `after`.
            pub(crate) fn changes(&self, after: &Settings) -> Changed {
                Changed { $($name: self.$name != after.$name,)+ }
            }

            /// Take the settings `changed` names from `from`.
            pub(crate) fn overlay(&mut self, from: &Settings, changed: &Changed) {
                $(
                    if changed.$name {
                        self.$name = from.$name.clone();
                    }
                )+
            }
        }

        /// A set of settings, one flag each.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub(crate) struct Changed {
            $($name: bool,)+
        }

        impl Changed {
            /// The settings in either set.
            pub(crate) fn union(self, other: Changed) -> Changed {
                Changed { $($name: self.$name || other.$name,)+ }
            }
        }

        #[cfg(test)]
        impl Changed {
            /// How many settings are in the set.
            pub(crate) fn count(&self) -> usize {
                [$(self.$name,)+].into_iter().filter(|&changed| changed).count()
            }
        }

        impl serde::Serialize for Settings {
            /// `{"task_size": {"value": 4194304, "source": {"kind": "default"}}, …}`
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(Some(SETTINGS.len()))?;
                $(map.serialize_entry(stringify!($name), &self.$name)?;)+
                map.end()
            }
        }

        /// For tests that walk every setting: its name, the example as a
        /// value set through the API, and its getter's answer as JSON.
        #[cfg(test)]
        pub(crate) struct Declared {
            pub name: &'static str,
            pub example: &'static str,
            pub set_example: fn(&mut Settings) -> Result<()>,
            pub get: fn(&Settings) -> serde_json::Value,
        }

        #[cfg(test)]
        pub(crate) const DECLARED: &[Declared] = &[$(
            Declared {
                name: stringify!($name),
                example: $example,
                set_example: |settings| {
                    let value = <$kind as kind::Kind>::parse($example)
                        .expect(concat!("the example of ", stringify!($name), " parses"));
                    declare_settings!(@call_setter settings, $set, value $(, $check)?);
                    Ok(())
                },
                get: |settings| serde_json::to_value(settings.$name()).expect("serializable"),
            },
        )+];
    };

    (@setter $name:ident, $set:ident, $ty:ty, $kind:ty, $rule:literal) => {
        #[doc = concat!("Set [`Settings::", stringify!($name), "`] (every value is valid).")]
        pub fn $set(&mut self, value: $ty) -> &mut Self {
            self.$name = Setting::api(value);
            global::touched(|set| set.$name = true);
            self
        }
    };
    (@setter $name:ident, $set:ident, $ty:ty, $kind:ty, $rule:literal, $check:path) => {
        #[doc = concat!("Set [`Settings::", stringify!($name), "`]: ", $rule, "; anything else is [`Error::InvalidSetting`] and changes nothing.")]
        pub fn $set(&mut self, value: $ty) -> Result<&mut Self> {
            if let Err(rule) = $check(&value) {
                return Err(Error::InvalidSetting {
                    setting: stringify!($name),
                    value: <$kind as kind::Kind>::show(&value),
                    rule,
                });
            }
            self.$name = Setting::api(value);
            global::touched(|set| set.$name = true);
            Ok(self)
        }
    };

    (@check $ty:ty) => {
        None::<kind::Rule<$ty>>
    };
    (@check $ty:ty, $check:path) => {
        Some($check as kind::Rule<$ty>)
    };

    (@call_setter $settings:ident, $set:ident, $value:ident) => {
        $settings.$set($value);
    };
    (@call_setter $settings:ident, $set:ident, $value:ident, $check:path) => {
        $settings.$set($value)?;
    };
}
