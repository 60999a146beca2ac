//! Opening a database for use: the pool and its migrations ([`crate::db`]), then the audit
//! log's keying checked against the key given ([`crate::audit::open`]). It stands apart from
//! both so that the data layer and the audit chain need not import each other.

use crate::db::{Db, DbOptions};
use crate::error::Result;

impl Db {
    /// Connects to `url` (`sqlite:PATH`, created if missing unless
    /// [`DbOptions::existing_only`]; or `postgres://...`), migrates, and checks the audit log's
    /// keying against [`DbOptions::audit_key`] ([`crate::audit::open`]).
    pub async fn connect(url: &str, options: &DbOptions) -> Result<Db> {
        let db = Db::open_pool(url, options).await?;
        crate::audit::open(
            &db,
            options.adopt_audit_key,
            options.inspect_audit,
            options.reads_only,
        )
        .await?;
        Ok(db)
    }
}
