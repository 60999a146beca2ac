//! `admin` commands on tenants: bootstrap, create, list, plan, delete, recount.

use std::process::ExitCode;

use anyhow::Result;

use super::print_listing;
use contextq_server::admin::TenantDeletion;
use contextq_server::{Db, Plan, Scope, admin};

/// Tenant + owner user + key + workspace; prints {"tenantId","apiKey","workspace"}.
#[derive(clap::Args)]
pub(crate) struct Bootstrap {
    /// The new tenant's name (unique; other commands take its id, printed as tenantId).
    #[arg(long = "tenant-name", visible_alias = "tenant")]
    pub(crate) tenant: String,
    /// The tenant's plan: free (100 contexts), pro (10,000) or unlimited.
    #[arg(long, default_value = "free")]
    pub(crate) plan: Plan,
    /// The first workspace's slug ([a-z0-9][a-z0-9-]{0,62}).
    #[arg(long, default_value = "default")]
    pub(crate) workspace: String,
    /// Comma-separated: read,write,admin.
    #[arg(long, default_value = "read,write,admin")]
    pub(crate) scopes: String,
}

impl Bootstrap {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let Bootstrap {
            tenant,
            plan,
            workspace,
            scopes,
        } = self;
        let scopes = Scope::parse_list(&scopes)?;
        let b = admin::bootstrap(db, &tenant, plan, &workspace, &scopes).await?;
        println!("{}", b.to_json_line());
        Ok(ExitCode::SUCCESS)
    }
}

/// Create a tenant; prints its id.
#[derive(clap::Args)]
pub(crate) struct CreateTenant {
    /// The tenant's name (unique).
    #[arg(long)]
    pub(crate) name: String,
    /// The tenant's plan: free (100 contexts), pro (10,000) or unlimited.
    #[arg(long, default_value = "free")]
    pub(crate) plan: Plan,
}

impl CreateTenant {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let CreateTenant { name, plan } = self;
        println!("{}", admin::create_tenant(db, &name, plan).await?);
        Ok(ExitCode::SUCCESS)
    }
}

/// List the tenants: id, name, plan, contexts. No audit key needed.
#[derive(clap::Args)]
pub(crate) struct ListTenants {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ListTenants {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let ListTenants { json } = self;
        let tenants = admin::list_tenants(db).await?;
        let header = ["TENANT", "NAME", "PLAN", "CONTEXTS", "CREATED"];
        print_listing(json, &tenants, &header, |t| {
            vec![
                t.tenant_id.clone(),
                t.name.clone(),
                t.plan.clone(),
                t.contexts.to_string(),
                t.created_at.clone(),
            ]
        })?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Change a tenant's plan: free (100 contexts), pro (10,000) or unlimited (audited). A
/// lower cap than it holds refuses new contexts only.
#[derive(clap::Args)]
pub(crate) struct SetPlan {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
    /// The new plan.
    #[arg(long)]
    pub(crate) plan: Plan,
}

impl SetPlan {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let SetPlan { tenant_id, plan } = self;
        admin::set_plan(db, &tenant_id, plan).await?;
        eprintln!("tenant {tenant_id} is on plan {}", plan.as_str());
        Ok(ExitCode::SUCCESS)
    }
}

/// Delete a tenant and its data; refused when it has chained audit rows.
#[derive(clap::Args)]
pub(crate) struct DeleteTenant {
    /// The tenant's id (tenantId).
    #[arg(long)]
    pub(crate) tenant_id: String,
}

impl DeleteTenant {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let DeleteTenant { tenant_id } = self;
        match admin::delete_tenant(db, &tenant_id).await? {
            TenantDeletion::Deleted => eprintln!("deleted tenant {tenant_id}"),
            TenantDeletion::KeptForAudit { audit_rows } => {
                eprintln!(
                    "tenant {tenant_id} was not deleted: {} ({audit_rows} rows)",
                    admin::CHAINED_AUDIT_REFUSAL
                );
                return Ok(ExitCode::FAILURE);
            }
        };
        Ok(ExitCode::SUCCESS)
    }
}

/// Count every tenant's contexts and versions and check them against the counts writes
/// keep (for plan caps and version retention); set right and print (JSON) the tenants
/// whose counts differed, which only an edit around the server makes. Scans the database.
#[derive(clap::Args)]
pub(crate) struct Recount {}

impl Recount {
    pub(crate) async fn run(self, db: &Db) -> Result<ExitCode> {
        let wrong = admin::recount(db).await?;
        for r in &wrong {
            println!("{}", serde_json::to_string(r)?);
        }
        eprintln!(
            "{} tenant(s) had counts that differed from their rows; set right",
            wrong.len()
        );
        Ok(ExitCode::SUCCESS)
    }
}
