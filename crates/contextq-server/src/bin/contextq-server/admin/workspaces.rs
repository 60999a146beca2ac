//! `admin` commands on workspaces: list, create, archive, delete.

use std::process::ExitCode;

use anyhow::Result;

use super::print_listing;
use contextq_server::{Db, admin};

/// List a tenant's workspaces. No audit key needed.
#[derive(clap::Args)]
pub(crate) struct ListWorkspaces {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ListWorkspaces {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let ListWorkspaces { tenant_id, json } = self;
        let list = admin::list_workspaces(db, &tenant_id).await?;
        print_listing(json, &list, &["SLUG", "NAME", "STATE", "CREATED"], |w| {
            let state = if w.archived { "archived" } else { "active" };
            vec![
                w.slug.clone(),
                w.name.clone(),
                state.into(),
                w.created_at.clone(),
            ]
        })?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Archive a workspace: read-only from now on (audited).
#[derive(clap::Args)]
pub(crate) struct ArchiveWorkspace {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// The workspace's slug.
    #[arg(long)]
    pub(crate) slug: String,
}

impl ArchiveWorkspace {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let ArchiveWorkspace { tenant_id, slug } = self;
        let ws = admin::archive_workspace(db, &tenant_id, &slug).await?;
        println!("{}", serde_json::to_string(&ws)?);
        Ok(ExitCode::SUCCESS)
    }
}

/// Delete an empty workspace (refused while it holds contexts; audited).
#[derive(clap::Args)]
pub(crate) struct DeleteWorkspace {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// The workspace's slug.
    #[arg(long)]
    pub(crate) slug: String,
}

impl DeleteWorkspace {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let DeleteWorkspace { tenant_id, slug } = self;
        admin::delete_workspace(db, &tenant_id, &slug).await?;
        eprintln!("deleted workspace {slug}");
        Ok(ExitCode::SUCCESS)
    }
}

/// Create a workspace for a tenant.
#[derive(clap::Args)]
pub(crate) struct CreateWorkspace {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// The workspace's slug: [a-z0-9][a-z0-9-]{0,62}, the first folder under /memories.
    #[arg(long)]
    pub(crate) slug: String,
    /// A display name (at most 256 bytes).
    #[arg(long, default_value = "")]
    pub(crate) name: String,
}

impl CreateWorkspace {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let CreateWorkspace {
            tenant_id,
            slug,
            name,
        } = self;
        let ws = admin::create_workspace(db, &tenant_id, &slug, &name).await?;
        println!("{}", serde_json::to_string(&ws)?);
        Ok(ExitCode::SUCCESS)
    }
}
