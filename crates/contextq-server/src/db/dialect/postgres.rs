//! PostgreSQL's SQL ([`super::Dialect`]): JSON with `json_agg`, row locks (`FOR UPDATE`),
//! `pg_notify`, and the search index as `context_search.doc`, a `tsvector` built from the
//! contract's terms (path at positions 1-256 weight A, content from 301) under a GIN index;
//! ranked by `ts_rank_cd`.

use contextq_api::search::{FILLER, Query};

use super::{Dialect, IndexDoc, Placeholder, Search, SearchFrom, Select, scope_term};
use crate::db::bind::{Bind, Statement};

/// Where a path's terms start in a document, and its content's.
const PATH_FROM: usize = 1;
const CONTENT_FROM: usize = 301;

pub(super) struct Postgres;

impl Dialect for Postgres {
    fn position_fn(&self) -> &'static str {
        "strpos"
    }

    fn json_array(&self, values: &str) -> String {
        format!("json_build_array({values})")
    }

    fn json_object(&self, pairs: &str) -> String {
        format!("json_build_object({pairs})")
    }

    fn json_agg(&self, element: &str) -> String {
        format!("COALESCE(json_agg({element})::text, '[]')")
    }

    fn detail_external_id(&self) -> &'static str {
        "((a.detail::json) ->> 'externalId') COLLATE \"C\""
    }

    fn insert_activity(&self) -> &'static str {
        // `seq` from its sequence.
        "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    }

    fn insert_activities(&self, rows: usize) -> String {
        format!(
            "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) VALUES {}",
            crate::db::value_rows(rows, 11)
        )
    }

    fn lock_head(&self) -> &'static str {
        // PostgreSQL locks the rows a locking `SELECT` skips by `OFFSET` ("rows skipped over
        // by OFFSET will get locked", the `SELECT` reference): the lock, and no row back.
        "SELECT 1 FROM audit_heads WHERE tenant_id = $1 FOR UPDATE OFFSET 1"
    }

    fn unsealed_heads(&self) -> &'static str {
        "SELECT tenant_id, seq, last_hash FROM audit_heads WHERE mac IS NULL FOR UPDATE"
    }

    fn lock_rows_of(&self, alias: &str) -> String {
        format!(" FOR UPDATE OF {alias}")
    }

    fn revocation_notice(&self) -> Option<&'static str> {
        Some("SELECT pg_notify($1, '')")
    }

    fn index_values(&self, tenant_id: &str, path: &[String], content: &[String]) -> Vec<String> {
        vec![tsvector(tenant_id, path, content)]
    }

    fn index_put(&self, doc: IndexDoc<'_>) -> Vec<Statement> {
        let mut binds = vec![
            Bind::Text(doc.id.to_string()),
            Bind::Text(doc.tenant_id.to_string()),
        ];
        binds.extend(doc.values.into_iter().map(Bind::Text));
        vec![(
            "INSERT INTO context_search (context_id, tenant_id, doc) VALUES ($1, $2, $3::tsvector) \
             ON CONFLICT (context_id) DO UPDATE SET doc = EXCLUDED.doc, tenant_id = EXCLUDED.tenant_id"
                .into(),
            binds,
        )]
    }

    fn index_remove(&self, id: &str) -> Vec<Statement> {
        vec![(
            "DELETE FROM context_search WHERE context_id = $1".into(),
            vec![Bind::Text(id.to_string())],
        )]
    }

    fn index_remove_tenant(&self, tenant_id: &str) -> Vec<Statement> {
        vec![(
            "DELETE FROM context_search WHERE tenant_id = $1".into(),
            vec![Bind::Text(tenant_id.to_string())],
        )]
    }

    fn search_from(&self, search: &Search<'_>, p: Placeholder<'_>) -> SearchFrom {
        let user = p(Bind::Text(tsquery(search.query)));
        // Each match's context by key: a lateral subquery with `OFFSET 0` is never flattened,
        // and with only the key in it no other index can serve it (a tenant condition beside
        // the key let the planner scan the tenant per match).
        SearchFrom {
            matches: "TRUE".to_string(),
            rank: format!(
                "ts_rank_cd('{{0.25, 0.25, 0.25, 1.0}}', m.doc, {user}::tsquery, 1)::float8"
            ),
            from:
                "m CROSS JOIN LATERAL (SELECT id, tenant_id, workspace_id, external_id, version, \
                   size_bytes FROM contexts WHERE id = m.context_id OFFSET 0) c"
                    .to_string(),
        }
    }

    fn search_workspace_join(&self) -> &'static str {
        " CROSS JOIN LATERAL (SELECT id, slug FROM workspaces WHERE id = c.workspace_id OFFSET 0) w"
    }

    fn search_candidates(&self, search: &Search<'_>, s: Select<'_>, p: Placeholder<'_>) -> String {
        let Select {
            columns,
            from,
            filter,
            max,
        } = s;
        // A materialized match list that only the tenant's documents can be in: the GIN index
        // drives, the first matches it yields are taken.
        let scoped = p(Bind::Text(format!(
            "'{}' & ({})",
            scope_term(search.tenant_id),
            tsquery(search.query)
        )));
        format!(
            "WITH m AS MATERIALIZED (SELECT context_id, doc FROM context_search \
             WHERE doc @@ {scoped}::tsquery) \
             SELECT {columns} FROM {from} WHERE {filter} LIMIT {max}"
        )
    }

    fn explain(&self) -> (&'static str, &'static str) {
        ("EXPLAIN", "QUERY PLAN")
    }

    fn filter_only(&self, column: &str) -> String {
        column.to_string()
    }
}

/// The query as `tsquery` text: each term a single-quoted lexeme (`'` and `\` escaped, though
/// terms hold neither), `:*` for a prefix, phrases joined with `<->`, items with `&`.
fn tsquery(query: &Query) -> String {
    let items: Vec<String> = query
        .items()
        .iter()
        .map(|i| {
            let phrase: Vec<String> = i
                .iter()
                .map(|t| {
                    format!(
                        "'{}'{}",
                        t.term.replace('\\', "\\\\").replace('\'', "''"),
                        if t.prefix { ":*" } else { "" }
                    )
                })
                .collect();
            format!("({})", phrase.join(" <-> "))
        })
        .collect();
    items.join(" & ")
}

/// The `tsvector` text of a document: every term with its positions (`'term':1A,5A`), the
/// scope term without positions. Terms hold letters, digits and marks only; quotes and
/// backslashes are escaped all the same.
fn tsvector(tenant_id: &str, path: &[String], content: &[String]) -> String {
    use std::fmt::Write as _;
    // Positions per term, path ones (weight A) first; one allocation per distinct term.
    let mut positions: std::collections::HashMap<&str, Vec<(usize, bool)>> = Default::default();
    for (terms, from, a) in [(path, PATH_FROM, true), (content, CONTENT_FROM, false)] {
        for (i, term) in terms.iter().enumerate() {
            if term != FILLER {
                positions
                    .entry(term.as_str())
                    .or_default()
                    .push((from + i, a));
            }
        }
    }
    let mut terms: Vec<(&str, Vec<(usize, bool)>)> = positions.into_iter().collect();
    terms.sort_unstable_by(|x, y| x.0.cmp(y.0));
    let quote = |out: &mut String, t: &str| {
        out.push('\'');
        for c in t.chars() {
            match c {
                '\'' => out.push_str("''"),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        out.push('\'');
    };
    let mut out = String::with_capacity(content.len() * 12 + 64);
    quote(&mut out, &scope_term(tenant_id));
    for (term, at) in terms {
        out.push(' ');
        quote(&mut out, term);
        out.push(':');
        for (k, (pos, a)) in at.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(out, "{pos}{}", if *a { "A" } else { "" });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextq_api::search::{MAX_CONTENT_TERMS, MAX_PATH_TERMS, index_terms};

    #[test]
    fn a_tsvector_holds_positions_weights_and_the_scope() {
        let path = index_terms("notes/OPS-4471.md", MAX_PATH_TERMS);
        let body = index_terms("ops ops it's", MAX_CONTENT_TERMS);
        let v = tsvector("ten_1", &path, &body);
        assert_eq!(
            v,
            "'t_ten_1' '4471':3A 'it':303 'md':4A 'notes':1A 'ops':2A,301,302 's':304"
        );
    }

    #[test]
    fn queries_become_lexemes() {
        assert_eq!(tsquery(&Query::parse("it's").unwrap()), "('it' <-> 's')");
        assert_eq!(
            tsquery(&Query::parse("ops dep*").unwrap()),
            "('ops') & ('dep':*)"
        );
    }
}
