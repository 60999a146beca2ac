//! What the operator commands print and parse, shared by `contextq-server admin` and
//! `contextq-memory keys`: listings (an aligned table or JSON lines), a key's row, durations.

use crate::store::tenants::KeyListing;

/// `--workspaces a,b`: the slugs, trimmed and lowercased (a slug is lowercase; the server
/// takes either case), empty parts left out.
pub fn slug_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The columns of a key listing ([`key_row`]).
pub const KEY_HEADER: [&str; 9] = [
    "KEY",
    "NAME",
    "LAST4",
    "SCOPES",
    "WORKSPACES",
    "KIND",
    "EXPIRES",
    "LAST USED",
    "STATE",
];

/// One key as a row under [`KEY_HEADER`] (never the key: its last four characters).
pub fn key_row(k: &KeyListing) -> Vec<String> {
    vec![
        k.key_id.clone(),
        k.name.clone().unwrap_or_default(),
        format!("…{}", k.last4),
        k.scopes.clone(),
        k.workspaces
            .as_ref()
            .map_or_else(|| "(all)".to_string(), |w| w.join(",")),
        k.kind.clone(),
        k.expires_at.clone().unwrap_or_else(|| "-".into()),
        k.last_used_at.clone().unwrap_or_else(|| "-".into()),
        k.revoked_at
            .as_ref()
            .map_or_else(|| "active".to_string(), |at| format!("revoked {at}")),
    ]
}

/// A listing: `items` as one JSON object per line with `json`, else their `row`s as an aligned
/// table under `header`.
pub fn listing<T: serde::Serialize>(
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> serde_json::Result<String> {
    let mut out = String::new();
    if json {
        for item in items {
            out.push_str(&serde_json::to_string(item)?);
            out.push('\n');
        }
        return Ok(out);
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    out.push_str(&line(header.iter().map(|h| h.to_string()).collect()));
    out.push('\n');
    for row in rows {
        out.push_str(&line(row));
        out.push('\n');
    }
    Ok(out)
}

/// `expire-key --in`: as [`parse_duration`], and `0s` (now).
pub fn parse_duration_or_zero(text: &str) -> Result<std::time::Duration, String> {
    if text.trim() == "0s" || text.trim() == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    parse_duration(text)
}

/// `--expires-in`: a positive whole number followed by `s`, `m`, `h` or `d`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text.len().saturating_sub(1);
    let (n, unit) = text.split_at(split);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: use a number and s, m, h or d (e.g. 8h, 30d)"
            ));
        }
    };
    match n.parse::<u64>() {
        Ok(n) if n > 0 => n
            .checked_mul(seconds)
            .map(std::time::Duration::from_secs)
            .ok_or_else(|| format!("{text:?} is too long")),
        _ => Err(format!(
            "{text:?}: use a positive whole number and s, m, h or d (e.g. 8h, 30d)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_trimmed_lowercased_and_never_empty() {
        assert_eq!(slug_list(" Acme, billing,,"), ["acme", "billing"]);
        assert!(slug_list(",").is_empty());
    }

    #[test]
    fn durations_take_a_unit_and_refuse_nonsense() {
        assert_eq!(parse_duration("90m").unwrap().as_secs(), 5400);
        assert_eq!(parse_duration("30d").unwrap().as_secs(), 30 * 86_400);
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("8").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert_eq!(parse_duration_or_zero("0s").unwrap().as_secs(), 0);
    }

    #[test]
    fn a_table_is_aligned_and_json_is_one_line_each() {
        #[derive(serde::Serialize)]
        struct R {
            a: &'static str,
        }
        let rows = [R { a: "x" }, R { a: "long" }];
        let t = listing(false, &rows, &["A", "B"], |r| vec![r.a.into(), "1".into()]).unwrap();
        assert_eq!(t, "A     B\nx     1\nlong  1\n");
        let j = listing(true, &rows, &["A"], |r| vec![r.a.into()]).unwrap();
        assert_eq!(j, "{\"a\":\"x\"}\n{\"a\":\"long\"}\n");
    }
}
