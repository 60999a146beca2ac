//! The ContextQ wire contract, shared by the client (`contextq-memory-tool`) and the server
//! (`contextq-server`) so that the two can never disagree: the JSON resources and bodies, the
//! limits, the error envelope, the API key format and its masking, the workspace slug rule, and
//! the extensions of the contract. No I/O.
//!
//! The contract is documented in `docs/contextq-api.md` of the repository. Types are lenient
//! where a ContextQ other than ours may leave a field out (`#[serde(default)]`), so that the
//! client reads any ContextQ; the server always sends every field.
//!
//! # Contents
//! - [`resources`]: [`Workspace`], [`Context`], [`ContextSummary`], [`ContextInput`],
//!   [`UpsertResult`].
//! - [`bodies`]: the request and response bodies of each endpoint.
//! - [`tenancy`]: [`Plan`] (quotas) and [`Scope`] (what a key may do).
//! - [`key`]: [`ApiKey`], the key format, and [`mask_secret`].
//! - [`slug`]: the workspace slug rule.
//! - [`limits`]: every bound of the contract.
//! - [`error`]: the error envelope and its codes; [`Error`], this crate's own error.
//! - [`extensions`]: [`Extensions`] and the `ContextQ-Extensions` header.
//! - [`endpoints`]: every endpoint of the contract and the extension that adds it.
//! - [`history`]: versions of contexts (extension `history`).
//! - [`audit`]: a tenant's own activity log (extension `audit-log`).
//! - [`memory_stores`]: Anthropic's Memory Stores API as served over the same memory
//!   (extension `memory-stores`): its objects, bodies, limits and ids.
//! - [`search`]: full-text search (extension `search`): the query language, the terms an
//!   index holds, matching lines, hits.
//! - [`edit`]: text edits (`str_replace`, `insert`) defined once, for the tool and the server.
//! - [`setters!`]: the builder methods of both crates' configuration structs.

pub mod audit;
pub mod bodies;
pub mod edit;
pub mod endpoints;
pub mod error;
pub mod extensions;
pub mod history;
pub mod key;
pub mod limits;
pub mod memory_stores;
pub mod resources;
pub mod search;
mod setters;
pub mod slug;
pub mod tenancy;

pub use edit::{EditFailure, Snippet, TextEdit};
pub use error::{Error, ErrorBody, ErrorCode, ErrorEnvelope};
pub use extensions::{EXTENSIONS_HEADER, Extensions, RESTORED_FROM_HEADER};
pub use key::{ApiKey, KEY_PREFIX, mask_secret, valid_key_format};
pub use resources::{Context, ContextInput, ContextSummary, UpsertResult, Workspace};
pub use slug::valid_slug;
pub use tenancy::{Plan, Scope};
