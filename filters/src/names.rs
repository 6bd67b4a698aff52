//! Name tables: an enum whose variants each have one spelling (and perhaps
//! aliases it is also read by), from which its parser, the list of valid
//! names that errors and help texts show, and its serde form all derive.
//! A variant added to a table is known everywhere at once, and every
//! `match` on the enum must then handle it: tables are matched without
//! `_ =>`.

use std::fmt;

/// A name that is not in a table, with the names that are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownName {
    /// What the table names: `gate`, `fault action`, `rollout command`.
    pub what: &'static str,
    pub found: String,
    /// The valid names, comma separated, in the table's order.
    pub expected: String,
}

impl UnknownName {
    pub fn new<'a>(
        what: &'static str,
        found: &str,
        names: impl IntoIterator<Item = &'a str>,
    ) -> UnknownName {
        UnknownName {
            what,
            found: found.to_string(),
            expected: join(names),
        }
    }
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}` (expected one of {})",
            self.what, self.found, self.expected
        )
    }
}

impl std::error::Error for UnknownName {}

/// `a, b, c`: the form every message lists names in.
pub fn join<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// Declares a name table:
///
/// ```
/// sluice_filters::name_table! {
///     /// What a door can do.
///     pub enum Door: "door command" {
///         Open = "open" | "unlock",
///         Shut = "shut",
///     }
/// }
/// assert_eq!(Door::parse("unlock"), Ok(Door::Open));
/// assert_eq!(Door::Shut.as_str(), "shut");
/// assert_eq!(Door::names(), "open, shut");
/// assert_eq!(
///     Door::parse("kick").unwrap_err().to_string(),
///     "unknown door command `kick` (expected one of open, shut)"
/// );
/// ```
///
/// The enum gets `ALL` (declaration order, which is also its `Ord`),
/// `as_str`, `parse` (names and aliases), `names` (for messages),
/// `Display`, `FromStr`, and serde as its name.
#[macro_export]
macro_rules! name_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        #[allow(dead_code)]
        impl $name {
            /// Every variant, in the table's order.
            $vis const ALL: &'static [$name] = &[$($name::$variant),+];
            /// What the table names, as messages say it.
            $vis const WHAT: &'static str = $what;

            /// The one spelling of this variant.
            $vis const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The variant spelled `text` (its name or an alias).
            $vis fn parse(text: &str) -> ::core::result::Result<$name, $crate::UnknownName> {
                $(
                    if text == $text $(|| text == $alias)* {
                        return Ok($name::$variant);
                    }
                )+
                Err($crate::UnknownName::new($what, text, Self::ALL.iter().map(|v| v.as_str())))
            }

            /// The valid names, comma separated, for messages and help.
            $vis fn names() -> String {
                $crate::join_names(Self::ALL.iter().map(|v| v.as_str()))
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::core::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(text: &str) -> ::core::result::Result<$name, $crate::UnknownName> {
                $name::parse(text)
            }
        }

        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<$name, D::Error> {
                let text = <::std::string::String as $crate::__serde::Deserialize>::deserialize(d)?;
                $name::parse(&text).map_err(<D::Error as $crate::__serde::de::Error>::custom)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    crate::name_table! {
        enum Colour: "colour" {
            Red = "red",
            Grey = "grey" | "gray",
        }
    }

    #[test]
    fn a_table_round_trips_and_lists_its_names() {
        for &c in Colour::ALL {
            assert_eq!(Colour::parse(c.as_str()), Ok(c));
            assert_eq!(c.to_string().parse::<Colour>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<Colour>(&json).unwrap(), c);
        }
        assert_eq!(Colour::parse("gray"), Ok(Colour::Grey));
        assert_eq!(Colour::names(), "red, grey");
        assert_eq!(
            serde_json::from_str::<Colour>("\"blue\"")
                .unwrap_err()
                .to_string(),
            "unknown colour `blue` (expected one of red, grey)"
        );
        assert!(Colour::Red < Colour::Grey);
    }
}
