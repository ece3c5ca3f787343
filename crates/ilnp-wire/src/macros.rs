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
