//! Macros shared by the wire modules.

/// The shared impls of a newtype over a u8 protocol number (`ipv6::NextHeader`,
/// `icmpv6::Icmpv6Type`): `name()` for the known values, `From` both ways, `Debug`
/// as `Type::CONST(n)` and `Display` as the name (or the number).
macro_rules! named_u8 {
    ($ty:ident { $($konst:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The value's name, for the values this crate knows.
            pub fn name(self) -> Option<&'static str> {
                Some(match self {
                    $(Self::$konst => $name,)+
                    _ => return None,
                })
            }

            fn const_name(self) -> Option<&'static str> {
                Some(match self {
                    $(Self::$konst => stringify!($konst),)+
                    _ => return None,
                })
            }
        }

        impl From<u8> for $ty {
            fn from(v: u8) -> Self {
                $ty(v)
            }
        }

        impl From<$ty> for u8 {
            fn from(v: $ty) -> u8 {
                v.0
            }
        }

        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.const_name() {
                    Some(n) => write!(f, concat!(stringify!($ty), "::{}({})"), n, self.0),
                    None => write!(f, concat!(stringify!($ty), "({})"), self.0),
                }
            }
        }

        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}", self.0),
                }
            }
        }
    };
}

/// An enum whose variants each have one name, written once beside the variant:
/// `ALL` (every variant, in declaration order), `COUNT`, `NAMES`, `as_str()`, `from_name()`
/// and `Display` as the name. With `#[serde_names]` first, serde (de)serialises each
/// variant as that same name (the caller derives `Serialize`/`Deserialize`).
///
/// ```
/// ilnp_wire::named_enum! {
///     #[derive(Clone, Copy, Debug, PartialEq, Eq)]
///     pub enum Colour { Red = "red", DarkBlue = "dark-blue" }
/// }
/// assert_eq!(Colour::ALL, [Colour::Red, Colour::DarkBlue]);
/// assert_eq!(Colour::DarkBlue.as_str(), "dark-blue");
/// assert_eq!(Colour::from_name("red"), Some(Colour::Red));
/// assert_eq!(Colour::DarkBlue.to_string(), "dark-blue");
/// ```
///
/// Variants with fields take `#[with_data]` (after `#[serde_names]`, if any):
/// `NAMES`, `as_str()` and `Display` (no `ALL` or `from_name`: a name alone is no
/// value). `ilnp_control::Request` names its `cmd` tag so.
///
/// ```
/// ilnp_wire::named_enum! {
///     #[with_data]
///     pub enum Cmd { Stop = "stop", SetWeight { weight: u32 } = "set_weight" }
/// }
/// assert_eq!(Cmd::NAMES, ["stop", "set_weight"]);
/// assert_eq!(Cmd::SetWeight { weight: 1 }.as_str(), "set_weight");
/// ```
#[macro_export]
macro_rules! named_enum {
    (#[serde_names] #[with_data] $(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $v:ident $({ $($f:tt)* })? = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v $({ $($f)* })?,)+
        }
        $crate::named_enum!(@data $name { $($v = $s),+ });
    };
    (#[with_data] $(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $v:ident $({ $($f:tt)* })? = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        $vis enum $name {
            $($(#[$vm])* $v $({ $($f)* })?,)+
        }
        $crate::named_enum!(@data $name { $($v = $s),+ });
    };
    (@data $name:ident { $($v:ident = $s:literal),+ }) => {
        #[allow(dead_code)]
        impl $name {
            /// Every variant's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            /// The variant's name.
            pub const fn as_str(&self) -> &'static str {
                match self {
                    $($name::$v { .. } => $s,)+
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (@impl $name:ident { $($v:ident = $s:literal),+ }) => {
        #[allow(dead_code)]
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// How many variants there are.
            pub const COUNT: usize = $name::ALL.len();
            /// Every variant's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            /// The variant's name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s,)+
                }
            }
            /// The variant of that name.
            pub fn from_name(s: &str) -> Option<$name> {
                match s {
                    $($s => Some($name::$v),)+
                    _ => None,
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (#[serde_names] $(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v,)+
        }
        $crate::named_enum!(@impl $name { $($v = $s),+ });
    };
    ($(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        $vis enum $name {
            $($(#[$vm])* $v,)+
        }
        $crate::named_enum!(@impl $name { $($v = $s),+ });
    };
}

/// serde for a `named_enum!` type of this crate (feature `serde`): as its name; an
/// unknown name is refused in serde's words for an enum (the value and the choices).
macro_rules! serde_by_name {
    ($name:ident) => {
        #[cfg(feature = "serde")]
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        #[cfg(feature = "serde")]
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::from_name(&s).ok_or_else(|| serde::de::Error::unknown_variant(&s, $name::NAMES))
            }
        }
    };
}
