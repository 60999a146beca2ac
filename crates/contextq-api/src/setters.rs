//! `setters!`: the builder methods of a configuration struct, one `fn field(self, value) -> Self`
//! per field. Both library crates' configuration structs are `#[non_exhaustive]` (a new setting
//! is not a breaking change), so other crates build them from `Default` with these; defining
//! them once here gives every setting of both crates the same shape.

/// One setter per listed field, documented "Sets `Type::field`." plus any doc lines given
/// before the field.
///
/// ```
/// #[derive(Default)]
/// #[non_exhaustive]
/// pub struct Limits {
///     /// Most rows.
///     pub rows: usize,
/// }
/// contextq_api::setters!(Limits {
///     /// 0: no limit.
///     rows: usize,
/// });
/// assert_eq!(Limits::default().rows(5).rows, 5);
/// ```
#[macro_export]
macro_rules! setters {
    ($ty:ident { $($(#[$doc:meta])* $field:ident: $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`].")]
                $(#[$doc])*
                #[must_use]
                pub fn $field(mut self, value: $fty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
