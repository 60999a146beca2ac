//! `setters!`: the builder methods of the server's configuration structs ([`crate::DbOptions`],
//! [`crate::ServerConfig`], [`crate::ConnectionLimits`]). They are `#[non_exhaustive]`, so that a
//! new setting is not a breaking change: other crates start from `Default` and set what they
//! need, `ServerConfig::default().read_only(true)`.

/// One `fn field(self, value) -> Self` per listed field, documented as "Sets [`Type::field`]".
macro_rules! setters {
    ($ty:ident { $($field:ident: $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`].")]
                #[must_use]
                pub fn $field(mut self, value: $fty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

pub(crate) use setters;
