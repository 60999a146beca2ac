//! The second floor: the rows a memory-tool write actually writes, in the server's own schema
//! (its migrations, its indexes), committed by one client with nothing else: no HTTP, no
//! adapter, no reads (what a write would read is kept in memory), no MAC computed (a constant
//! of the same length is stored). Issue 52 defines the floor as "one transaction of the rows a
//! write needs"; the first floor (module `floor`) is the least any versioned write needs, this
//! one is what our schema needs, so that the distance between a write and this floor is the
//! server's and the adapter's own work, and the distance between the two floors is the schema's.
//!
//! The writes follow the trace's mix: of every 10, 2 create a file, 7 edit one, 1 deletes one.
//! Each writes what the server writes for it (docs/costs.md): the context row, its tag, the
//! version counter and version row (the previous version marked superseded), the keyed
//! request's outcome, the audit row and the tenant's head, and the search index (SQLite: the
//! document number and FTS5's row; PostgreSQL: the `tsvector` row).

use contextq_server::Backend;

/// A value of a statement.
#[derive(Debug, Clone)]
pub(super) enum V {
    Text(String),
    Int(i64),
    Null,
}

/// One statement, with `?k` placeholders.
pub(super) type Statement = (&'static str, Vec<V>);

const TENANT: &str = "ten_floor";
const WORKSPACE: &str = "ws_floor";
const KEY: &str = "key_floor";
/// What the memory tool tags its files with.
const TAG: &str = "memory-tool";
/// A hex digest's length (the MAC, the hashes, the request's SHA-256).
const HEX: &str = "6d0c52a1a0cde6f1f6b0f6e0b3f5d2c1e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3";

/// The rows the floor starts from: the tenant, its workspace and its audit head.
pub(super) fn setup() -> Vec<Statement> {
    vec![
        (
            "INSERT INTO tenants (id, name, plan, created_at) VALUES (?1, ?1, 'unlimited', ?2)",
            vec![V::Text(TENANT.into()), V::Text(now())],
        ),
        (
            "INSERT INTO workspaces (id, tenant_id, slug, name, created_at) VALUES (?1, ?2, 'ws', 'ws', ?3)",
            vec![
                V::Text(WORKSPACE.into()),
                V::Text(TENANT.into()),
                V::Text(now()),
            ],
        ),
        (
            "INSERT INTO audit_heads (tenant_id, seq, last_hash, keyed_from, mac) VALUES (?1, 0, NULL, 1, ?2)",
            vec![V::Text(TENANT.into()), V::Text(HEX.into())],
        ),
    ]
}

fn now() -> String {
    "2026-12-07T00:00:00.000Z".to_string()
}

/// A live file of the floor.
#[derive(Clone)]
struct File {
    id: String,
    path: String,
    /// Its search document number (SQLite).
    n: i64,
    version: i64,
    /// The history sequence number of its current version.
    seq: i64,
}

/// The floor's writes, in order; each is the statements of one transaction.
pub(super) struct Writes {
    backend: Backend,
    live: Vec<File>,
    files: i64,
    seq: i64,
    outcomes: i64,
    rng: fastrand::Rng,
}

impl Writes {
    pub(super) fn new(backend: Backend) -> Writes {
        Writes {
            backend,
            live: Vec::new(),
            files: 0,
            seq: 0,
            outcomes: 0,
            rng: fastrand::Rng::with_seed(52),
        }
    }

    /// The statements of write `i`.
    pub(super) fn next(&mut self, i: usize) -> Vec<Statement> {
        let content = format!("{}{i}\n", super::NOTE);
        self.seq += 1;
        let mut out = Vec::new();
        let (action, usage, file) = match i % 10 {
            _ if self.live.is_empty() => self.create(&content, &mut out),
            0 | 1 => self.create(&content, &mut out),
            9 => {
                let at = self.rng.usize(..self.live.len());
                let file = self.live.swap_remove(at);
                out.push((
                    "DELETE FROM context_tags WHERE context_id = ?1",
                    vec![V::Text(file.id.clone())],
                ));
                out.push((
                    "DELETE FROM contexts WHERE id = ?1",
                    vec![V::Text(file.id.clone())],
                ));
                self.index(&file, None, &mut out);
                ("delete", -1, file)
            }
            _ => {
                let at = self.rng.usize(..self.live.len());
                let file = &mut self.live[at];
                file.version += 1;
                out.push((
                    "UPDATE contexts SET content = ?1, size_bytes = ?2, version = ?3, updated_at = ?4 WHERE id = ?5",
                    vec![
                        V::Text(content.clone()),
                        V::Int(content.len() as i64),
                        V::Int(file.version),
                        V::Text(now()),
                        V::Text(file.id.clone()),
                    ],
                ));
                let file = file.clone();
                self.index(&file, Some(&content), &mut out);
                ("update", 0, file)
            }
        };
        if action != "create" {
            out.push((
                "UPDATE context_versions SET superseded = 1 WHERE tenant_id = ?1 AND seq = ?2",
                vec![V::Text(TENANT.into()), V::Int(file.seq)],
            ));
        }
        if let Some(live) = self.live.iter_mut().find(|f| f.id == file.id) {
            live.seq = self.seq;
        }
        let kept = (action != "delete").then_some(content);
        self.history(&file, action, kept.as_deref(), &mut out);
        self.outcome_and_audit(&file, action, usage, &mut out);
        out
    }

    fn create(&mut self, content: &str, out: &mut Vec<Statement>) -> (&'static str, i64, File) {
        self.files += 1;
        let file = File {
            id: format!("ctx_{:020x}", self.files),
            path: format!("/memories/notes/f{}.md", self.files),
            n: self.files,
            version: 1,
            seq: self.seq,
        };
        out.push((
            "INSERT INTO contexts (id, tenant_id, workspace_id, external_id, type, title, content, tags, size_bytes, version, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 'memory', NULL, ?5, '[\"memory-tool\"]', ?6, 1, ?7, ?7)",
            vec![
                V::Text(file.id.clone()),
                V::Text(TENANT.into()),
                V::Text(WORKSPACE.into()),
                V::Text(file.path.clone()),
                V::Text(content.to_string()),
                V::Int(content.len() as i64),
                V::Text(now()),
            ],
        ));
        out.push((
            "INSERT INTO context_tags (context_id, tenant_id, tag) VALUES (?1, ?2, ?3)",
            vec![
                V::Text(file.id.clone()),
                V::Text(TENANT.into()),
                V::Text(TAG.into()),
            ],
        ));
        self.index(&file, Some(content), out);
        self.live.push(file.clone());
        ("create", 1, file)
    }

    /// The search index's rows for `file` now holding `content` (`None`: deleted).
    fn index(&self, file: &File, content: Option<&str>, out: &mut Vec<Statement>) {
        match self.backend {
            Backend::Sqlite => {
                if file.version > 1 || content.is_none() {
                    out.push((
                        "DELETE FROM context_fts WHERE rowid = ?1",
                        vec![V::Int(file.n)],
                    ));
                }
                match content {
                    Some(content) => {
                        if file.version == 1 {
                            out.push((
                                "INSERT INTO search_docs (n, context_id) VALUES (?1, ?2)",
                                vec![V::Int(file.n), V::Text(file.id.clone())],
                            ));
                        }
                        out.push((
                            "INSERT INTO context_fts (rowid, scope, path, body) VALUES (?1, ?2, ?3, ?4)",
                            vec![
                                V::Int(file.n),
                                V::Text(format!("{TENANT} {WORKSPACE}")),
                                V::Text(file.path.clone()),
                                V::Text(content.to_string()),
                            ],
                        ));
                    }
                    None => out.push((
                        "DELETE FROM search_docs WHERE context_id = ?1",
                        vec![V::Text(file.id.clone())],
                    )),
                }
            }
            Backend::Postgres => match content {
                Some(content) => out.push((
                    "INSERT INTO context_search (context_id, tenant_id, doc) VALUES (?1, ?2, ?3::tsvector) \
                     ON CONFLICT (context_id) DO UPDATE SET doc = EXCLUDED.doc, tenant_id = EXCLUDED.tenant_id",
                    vec![
                        V::Text(file.id.clone()),
                        V::Text(TENANT.into()),
                        V::Text(tsvector(&file.path, content)),
                    ],
                )),
                None => out.push((
                    "DELETE FROM context_search WHERE context_id = ?1",
                    vec![V::Text(file.id.clone())],
                )),
            },
        }
    }

    fn history(&self, file: &File, action: &str, content: Option<&str>, out: &mut Vec<Statement>) {
        out.push((
            "INSERT INTO version_counters (tenant_id, external_id, last_version) VALUES (?1, ?2, ?3) \
             ON CONFLICT (tenant_id, external_id) DO UPDATE SET last_version = excluded.last_version",
            vec![
                V::Text(TENANT.into()),
                V::Text(file.path.clone()),
                V::Int(file.version + i64::from(action == "delete")),
            ],
        ));
        out.push((
            "INSERT INTO context_versions (tenant_id, seq, external_id, version, context_id, context_version, workspace_id, action, type, title, tags, content, size_bytes, api_key_id, created_at, content_sha256, superseded, renamed_from, restored_from) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'memory', NULL, '[\"memory-tool\"]', ?9, ?10, ?11, ?12, ?13, ?14, NULL, NULL)",
            vec![
                V::Text(TENANT.into()),
                V::Int(self.seq),
                V::Text(file.path.clone()),
                V::Int(file.version + i64::from(action == "delete")),
                V::Text(file.id.clone()),
                V::Int(file.version),
                V::Text(WORKSPACE.into()),
                V::Text(action.into()),
                content.map_or(V::Null, |c| V::Text(c.to_string())),
                V::Int(content.map_or(0, |c| c.len() as i64)),
                V::Text(KEY.into()),
                V::Text(now()),
                content.map_or(V::Null, |_| V::Text(HEX.into())),
                V::Int(i64::from(action == "delete")),
            ],
        ));
    }

    fn outcome_and_audit(
        &mut self,
        file: &File,
        action: &str,
        usage: i64,
        out: &mut Vec<Statement>,
    ) {
        self.outcomes += 1;
        let answer = format!(
            "{{\"status\":200,\"body\":{{\"id\":\"{}\",\"externalId\":\"{}\",\"version\":{},\"updatedAt\":\"{}\"}}}}",
            file.id,
            file.path,
            file.version,
            now()
        );
        out.push((
            "INSERT INTO write_outcomes (tenant_id, key, n, request_sha256, status, answer, created_at) \
             VALUES (?1, ?2, ?3, ?4, 200, ?5, ?6) ON CONFLICT (tenant_id, key) DO UPDATE SET \
             n = excluded.n, request_sha256 = excluded.request_sha256, status = excluded.status, \
             answer = excluded.answer, created_at = excluded.created_at",
            vec![
                V::Text(TENANT.into()),
                V::Text(format!("idem_{:024x}", self.outcomes)),
                V::Int(self.outcomes),
                V::Text(HEX.into()),
                V::Text(answer),
                V::Text(now()),
            ],
        ));
        out.push((
            "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
             VALUES (?1, ?2, ?3, ?4, 'context', ?5, ?6, ?7, ?8, ?8, ?8)",
            vec![
                V::Text(TENANT.into()),
                V::Int(self.seq),
                V::Text(KEY.into()),
                V::Text(format!("context.{action}")),
                V::Text(file.id.clone()),
                V::Text(super::AUDIT.into()),
                V::Text(now()),
                V::Text(HEX.into()),
            ],
        ));
        out.push((
            "UPDATE audit_heads SET seq = ?1, last_hash = ?2, mac = ?2, contexts = contexts + ?3, versions = versions + 1 WHERE tenant_id = ?4",
            vec![
                V::Int(self.seq),
                V::Text(HEX.into()),
                V::Int(usage),
                V::Text(TENANT.into()),
            ],
        ));
    }
}

/// A `tsvector` literal of the path's and the content's words, with positions.
fn tsvector(path: &str, content: &str) -> String {
    let words = path
        .split(|c: char| !c.is_alphanumeric())
        .chain(content.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty());
    let mut out = String::new();
    for (i, w) in words.enumerate() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&format!("'{}':{}", w.to_lowercase(), i + 1));
    }
    out
}

/// `sql` with its `?k` replaced by `values` as SQL literals (the floor's own values, which hold
/// no quote but the `tsvector`'s, doubled here).
pub(super) fn inline(sql: &str, values: &[V]) -> String {
    let mut out = sql.to_string();
    for (k, v) in values.iter().enumerate().rev() {
        let literal = match v {
            V::Text(s) => format!("'{}'", s.replace('\'', "''")),
            V::Int(n) => n.to_string(),
            V::Null => "NULL".into(),
        };
        out = out.replace(&format!("?{}", k + 1), &literal);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_the_traces_and_every_write_records_its_history() {
        let mut w = Writes::new(Backend::Sqlite);
        let writes: Vec<_> = (0..100).map(|i| w.next(i)).collect();
        let count = |needle: &str| {
            writes
                .iter()
                .filter(|s| s.iter().any(|(sql, _)| sql.starts_with(needle)))
                .count()
        };
        assert_eq!(count("INSERT INTO contexts"), 20);
        assert_eq!(count("DELETE FROM contexts"), 10);
        assert_eq!(count("UPDATE contexts"), 70);
        assert_eq!(count("INSERT INTO context_versions"), 100);
        assert_eq!(count("UPDATE audit_heads"), 100);
    }

    #[test]
    fn inlining_replaces_the_highest_numbers_first() {
        let values: Vec<V> = (1..=11).map(V::Int).collect();
        assert_eq!(inline("?1 ?11 ?2", &values), "1 11 2");
        assert_eq!(inline("?1", &[V::Text("it's".into())]), "'it''s'");
    }
}
