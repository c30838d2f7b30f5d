//! Closed sets of names: enums whose values travel as strings. One list per enum gives its
//! serde names (so the schema lists them), `as_str`, `ALL`, `NAMES`, `Display` and `FromStr`,
//! so what a client parses, what the schema documents and what an error suggests cannot
//! differ.

use std::fmt;

/// A name outside its closed set: the error of each such enum's `FromStr`. Its message names
/// every accepted value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What the set names, e.g. `profile`.
    pub what: &'static str,
    /// The name given.
    pub given: String,
    /// Every accepted name, in the schema's order.
    pub accepted: &'static [&'static str],
}

impl UnknownName {
    /// The accepted names as prose: `a, b or c`.
    pub fn choices(&self) -> String {
        match self.accepted.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} {:?}; use {}",
            self.what,
            self.given,
            self.choices()
        )
    }
}

impl std::error::Error for UnknownName {}

/// Declares a fieldless enum whose variants are the names given, in that order, and its
/// conversions from and to those names.
macro_rules! names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash,
            serde::Serialize, serde::Deserialize, schemars::JsonSchema,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant, )+
        }

        impl $name {
            /// Every value, in the schema's order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
            /// Every value's name, in the schema's order.
            pub const NAMES: &'static [&'static str] = &[$($wire),+];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::UnknownName {
                        what: $what,
                        given: s.to_owned(),
                        accepted: Self::NAMES,
                    })
            }
        }
    };
}

pub(crate) use names;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::{ProfileId, SessionEndReason};

    #[test]
    fn a_name_parses_to_its_value_and_back() {
        for &p in ProfileId::ALL {
            assert_eq!(p.as_str().parse::<ProfileId>(), Ok(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        let reason: SessionEndReason = serde_json::from_str("\"closed by client\"").unwrap();
        assert_eq!(reason, SessionEndReason::ClosedByClient);
    }

    #[test]
    fn an_unknown_name_is_refused_with_every_accepted_one() {
        let e = "claude".parse::<ProfileId>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown profile \"claude\"; use openai, anthropic, gemini or bash"
        );
        let e = serde_json::from_str::<ProfileId>("\"claude\"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown variant `claude`, expected one of `openai`, `anthropic`, `gemini`, `bash` at line 1 column 8"
        );
    }
}
