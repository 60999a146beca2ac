//! `contextq-memory keys create|list|revoke|expire`: the keys of the embedded data directory's
//! tenant, so that each teammate or agent of a `serve` gets its own key (its own name in the
//! audit trail, its own workspaces, revocable alone) without `contextq-server admin` flags.
//! Only the local tenant's keys are touched; the local key itself (`embedded.json`, which every
//! command on the directory uses) is never revoked or expired here.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use contextq_server::{Scope, admin};

use crate::embedded::{Embedded, Mode};
use crate::out::outln;

/// What to do with the keys.
#[derive(clap::Subcommand, Debug)]
pub enum KeysCommand {
    /// Mint a key; prints {"keyId","apiKey"} (the key is shown only this once).
    Create {
        /// A name (1 to 64 characters), shown by `keys list` and in the audit trail.
        #[arg(long)]
        name: Option<String>,
        /// Comma-separated workspace slugs the key reads and writes (missing ones are
        /// created). A key of one workspace sees it as /memories over MCP. Default: all.
        #[arg(long)]
        workspaces: Option<String>,
        /// Comma-separated: read, write, admin.
        #[arg(long, default_value = "read,write")]
        scopes: String,
        /// The key stops working this long after its creation (e.g. 90m, 8h, 30d).
        #[arg(long, value_parser = admin::text::parse_duration)]
        expires_in: Option<Duration>,
    },
    /// List the keys: id, name, last four characters, scopes, workspaces, expiry, last use.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key (its id, or the key itself) and the inspector sessions minted from it.
    Revoke {
        /// The key's id (keyId) or the key (sk_live_...).
        key: String,
    },
    /// Make a key stop working after a while (0s: now).
    Expire {
        /// The key's id (keyId) or the key (sk_live_...).
        key: String,
        /// How long from now (a number and s, m, h or d).
        #[arg(long = "in", value_parser = admin::text::parse_duration_or_zero)]
        expires_in: Duration,
    },
}

/// Runs `command` on the data directory `data_dir` (provisioned on first use).
pub async fn run(data_dir: &Path, command: KeysCommand) -> Result<()> {
    let embedded = Embedded::start(data_dir, "127.0.0.1:0", Mode::default()).await?;
    let result = on(&embedded, command).await;
    embedded.stop().await;
    result
}

async fn on(embedded: &Embedded, command: KeysCommand) -> Result<()> {
    let db = &embedded.db;
    let tenant = &embedded.credentials.tenant_id;
    match command {
        KeysCommand::Create {
            name,
            workspaces,
            scopes,
            expires_in,
        } => {
            let scopes = Scope::parse_list(&scopes)?;
            let workspaces = workspaces.as_deref().map(admin::text::slug_list);
            if let Some(slugs) = &workspaces {
                if slugs.is_empty() {
                    bail!("--workspaces names no workspace: give slugs, or leave it out for all");
                }
                for slug in slugs {
                    embedded.ensure_workspace(slug).await?;
                }
            }
            let key = admin::create_key_named(
                db,
                tenant,
                &scopes,
                expires_in,
                workspaces.as_deref(),
                name.as_deref(),
            )
            .await?;
            outln!("{}", serde_json::to_string(&key)?);
            eprintln!(
                "give this key to one agent or teammate: CONTEXT_API_KEY for the CLI, or `Authorization: Bearer <key>` for serve's /mcp (it is not shown again)"
            );
        }
        KeysCommand::List { json } => {
            let keys = admin::list_keys(db, tenant).await?;
            let text =
                admin::text::listing(json, &keys, &admin::text::KEY_HEADER, admin::text::key_row)?;
            outln!("{}", text.trim_end_matches('\n'));
        }
        KeysCommand::Revoke { key } => {
            let key = own_key(embedded, &key).await?;
            if !admin::revoke_key(db, &key).await? {
                bail!("the key is already revoked");
            }
            eprintln!("revoked");
        }
        KeysCommand::Expire { key, expires_in } => {
            let key = own_key(embedded, &key).await?;
            if !admin::expire_key(db, &key, expires_in).await? {
                bail!("the key is revoked or has expired already");
            }
            eprintln!("the key stops working in {}s", expires_in.as_secs());
        }
    }
    Ok(())
}

/// `key` (an id or a key) when it is one of the local tenant's keys other than the local key.
async fn own_key(embedded: &Embedded, key: &str) -> Result<String> {
    let key = key.trim();
    let db = &embedded.db;
    let tenant = &embedded.credentials.tenant_id;
    let local = admin::active_key(db, &embedded.credentials.api_key)
        .await
        .context("cannot look up the local key")?
        .map(|k| k.key_id);
    let id = if contextq_api::valid_key_format(key) {
        admin::active_key(db, key)
            .await?
            .filter(|k| &k.tenant_id == tenant)
            .map(|k| k.key_id)
    } else {
        let keys = admin::list_keys(db, tenant).await?;
        keys.iter()
            .any(|k| k.key_id == key)
            .then(|| key.to_string())
    };
    match id {
        Some(id) if Some(&id) == local.as_ref() => bail!(local_key_refusal()),
        Some(_) => Ok(key.to_string()),
        None => bail!(
            "no active key {} in this data directory: `contextq-memory keys list` shows its keys",
            shown(key)
        ),
    }
}

/// An id as it is; anything shaped like a key masked (`sk_live_…abcd`).
fn shown(key: &str) -> String {
    if key.starts_with("sk_") {
        contextq_api::mask_secret(key)
    } else {
        format!("{key:?}")
    }
}

fn local_key_refusal() -> String {
    "that is the data directory's own key (embedded.json), which every command on it uses: revoke the keys you gave out instead".into()
}
