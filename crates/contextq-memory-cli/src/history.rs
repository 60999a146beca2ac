//! `contextq-memory history | show | diff | restore | redact`: what a memory file was, how it
//! changed, putting it (or a whole directory) back, and taking a secret out of its history for
//! good, on a ContextQ that keeps versions (the embedded default does;
//! `contextq_memory_tool::contextq::{history, redaction}` do the work).
//!
//! Output is for people: tables and a unified diff (coloured on a terminal, plain when piped or
//! when `NO_COLOR` is set), a restore's plan before it runs, and a report of exactly what it did.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Result, bail};
use contextq_api::history::Action;
use contextq_memory_tool::contextq::history::{
    FileVersion, RestorePlan, Restored, StepAction, StepOutcome, rfc3339,
};
use contextq_memory_tool::contextq::redaction::{RedactTarget, RedactionReport};
use contextq_memory_tool::contextq::{ContextQError, ContextQMemoryTool};

use crate::stores::{self, Settings, StoreChoice};

/// One of the history commands.
pub enum Command {
    History {
        path: String,
        /// One JSON object per version instead of a table.
        json: bool,
    },
    Show {
        path: String,
        version: u64,
    },
    Diff {
        path: String,
        a: Option<u64>,
        b: Option<u64>,
    },
    RestoreFile {
        path: String,
        version: u64,
        dry_run: bool,
    },
    RestoreTree {
        dir: String,
        at: String,
        dry_run: bool,
    },
    Redact {
        path: String,
        what: Redact,
        dry_run: bool,
    },
}

/// Whether a change was confirmed: `--yes`, or not on a terminal (a script), or the person at
/// the terminal answered yes to `question`.
pub fn confirmed(yes: bool, question: &str) -> Result<bool> {
    use std::io::{BufRead, Write};
    if yes || !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(true);
    }
    let mut err = std::io::stderr().lock();
    write!(err, "{question} [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// `--at`: RFC 3339 (`2026-12-03T10:00:00Z`), a date and time without seconds or zone
/// (`2026-12-03T10:00`, `2026-12-03 10:00`, UTC), a date (`2026-12-03`: its start, UTC), or a
/// time ago (`10 minutes ago`, `2h ago`, `3 days ago`); as RFC 3339 UTC.
pub fn parse_when(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String> {
    use chrono::{NaiveDate, NaiveDateTime, TimeZone, Utc};
    let t = text.trim();
    let fmt = |d: chrono::DateTime<Utc>| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(fmt(d.with_timezone(&Utc)));
    }
    for layout in [
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, layout) {
            return Ok(fmt(Utc.from_utc_datetime(&d)));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(fmt(
            Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
        ));
    }
    if let Some(ago) = t.strip_suffix("ago").map(str::trim) {
        let split = ago.find(|c: char| !c.is_ascii_digit()).unwrap_or(ago.len());
        let (n, unit) = ago.split_at(split);
        let unit = unit.trim();
        // "minutes" and "minute" alike; "s" alone is seconds.
        let unit = if unit.len() > 1 {
            unit.trim_end_matches('s')
        } else {
            unit
        };
        let seconds = match unit {
            "s" | "sec" | "second" => 1,
            "m" | "min" | "minute" => 60,
            "h" | "hour" => 3600,
            "d" | "day" => 86_400,
            "w" | "week" => 7 * 86_400,
            _ => 0,
        };
        if let Ok(n) = n.parse::<i64>()
            && seconds > 0
        {
            return Ok(fmt(
                now - chrono::Duration::seconds(n.saturating_mul(seconds))
            ));
        }
    }
    bail!(
        "--at {text:?} is not a time: give one as `history` prints it (2026-12-03T10:00:00Z), a date and time (2026-12-03 10:00, UTC), a date (2026-12-03) or a time ago (10 minutes ago)"
    )
}

/// What `redact` takes.
pub enum Redact {
    Version(u64),
    Matching { text: String, all_paths: bool },
}

/// `--matching TEXT`: the text, or (`-`) one line of stdin without its line ending.
pub fn matching_text(arg: String) -> Result<String> {
    let text = if arg == "-" {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_string()
    } else {
        arg
    };
    if text.is_empty() {
        bail!("--matching needs a non-empty text: nothing was redacted");
    }
    Ok(text)
}

/// Runs `command` on the ContextQ the settings name (embedded unless `CONTEXT_API_URL`).
/// Runs `command`; `yes` skips the confirmation a restore or redaction asks on a terminal.
pub async fn command(settings: &Settings, command: Command, yes: bool) -> Result<ExitCode> {
    let opened = stores::open(&StoreChoice::ContextQ, settings).await?;
    let result = match &opened.history {
        Some(tool) => run(tool, command, yes).await,
        None => Err(anyhow::anyhow!("history needs a ContextQ store")),
    };
    opened.close().await;
    result
}

/// `restore PATH --at TIME`: refused for a time in the future; for a file, the restore of its
/// version in effect at that time (a directory's plan otherwise).
async fn resolve_at(
    tool: &ContextQMemoryTool,
    dir: String,
    at: String,
    dry_run: bool,
) -> Result<Command> {
    let now = chrono::Utc::now();
    let at = parse_when(&at, now)?;
    let when = chrono::DateTime::parse_from_rfc3339(&at)?.with_timezone(&chrono::Utc);
    if when > now {
        bail!(
            "--at {at} is in the future (now is {}): nothing can be restored to it; give a past time as `history` prints it",
            now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
    }
    // Only a file has versions of its own.
    let versions = match tool.history(&dir).await {
        Ok(v) if !v.is_empty() => v,
        _ => return Ok(Command::RestoreTree { dir, at, dry_run }),
    };
    let then = versions.iter().find(|v| v.at <= when);
    match then {
        Some(v) => Ok(Command::RestoreFile {
            path: dir,
            version: v.version,
            dry_run,
        }),
        None => {
            let oldest = &versions[versions.len() - 1];
            bail!(
                "{dir} has no version kept from {at}: its oldest kept version is {} ({}); its state then is not known, so nothing was changed",
                oldest.version,
                rfc3339(&oldest.at)
            )
        }
    }
}

/// The error for a history command on `path`: a directory is said to be one.
async fn not_a_file(
    tool: &ContextQMemoryTool,
    path: &str,
    e: contextq_memory_tool::Error,
) -> anyhow::Error {
    use contextq_memory_tool::Store;
    let is_dir = match contextq_memory_tool::MemoryPath::parse(path) {
        Ok(p) => matches!(tool.store().list(&p).await, Ok(Some(_))),
        Err(_) => false,
    };
    if is_dir {
        anyhow::anyhow!(
            "{path} is a directory: `history` shows one file's versions (`history {path}/FILE`); `restore {path} --at TIME --dry-run` shows the directory at a point in time"
        )
    } else {
        e.into()
    }
}

async fn run(tool: &ContextQMemoryTool, command: Command, yes: bool) -> Result<ExitCode> {
    let command = match command {
        Command::RestoreTree { dir, at, dry_run } => resolve_at(tool, dir, at, dry_run).await?,
        c => c,
    };
    let mut out = std::io::stdout().lock();
    match command {
        Command::History { path, json } => {
            let versions = match tool.history(&path).await {
                Ok(v) => v,
                Err(e) => return Err(not_a_file(tool, &path, e).await),
            };
            if json {
                for v in &versions {
                    let line = serde_json::json!({
                        "path": path,
                        "version": v.version,
                        "action": v.action.as_str(),
                        "at": rfc3339(&v.at),
                        "sizeBytes": v.size,
                        "key": v.key,
                        "keyName": v.key_name,
                        "restoredFrom": v.restored_from,
                        "sha256": v.sha256,
                        "redactedAt": v.redacted_at.as_ref().map(rfc3339),
                    });
                    writeln!(out, "{line}")?;
                }
            } else {
                writeln!(out, "{}", history_table(&versions))?;
            }
        }
        Command::Show { path, version } => {
            let v = tool.version(&path, version).await?;
            redacted(&path, &v)?;
            match v.content {
                Some(text) => out.write_all(text.as_bytes())?,
                None => bail!(
                    "version {version} of {path} is its deletion ({}): it has no content; `history {path}` lists the others",
                    rfc3339(&v.at)
                ),
            }
        }
        Command::Diff { path, a, b } => {
            let (a, b) = match (a, b) {
                (Some(a), Some(b)) => (a, b),
                (Some(a), None) => (a, newest(tool, &path).await?),
                (None, _) => {
                    let newest = newest(tool, &path).await?;
                    if newest < 2 {
                        bail!("{path} has one version only: nothing to compare");
                    }
                    (newest - 1, newest)
                }
            };
            let old = tool.version(&path, a).await?;
            let new = tool.version(&path, b).await?;
            redacted(&path, &old)?;
            redacted(&path, &new)?;
            let colour = out.is_terminal() && std::env::var_os("NO_COLOR").is_none();
            out.write_all(unified_diff(&path, &old, &new, colour).as_bytes())?;
        }
        Command::RestoreFile {
            path,
            version,
            dry_run,
        } => {
            let versions = match tool.history(&path).await {
                Ok(v) => v,
                Err(e) => return Err(not_a_file(tool, &path, e).await),
            };
            let latest = versions[0].version;
            let target = tool.version(&path, version).await?;
            redacted(&path, &target)?;
            let what = match target.action {
                Action::Delete => "deleted".to_string(),
                _ => format!("{} bytes", target.size),
            };
            writeln!(
                out,
                "Restore {path} to version {version} ({}, {what}); its newest version is {latest}.",
                rfc3339(&target.at)
            )?;
            if dry_run {
                writeln!(out, "Dry run: nothing was changed.")?;
                return Ok(ExitCode::SUCCESS);
            }
            let done = match tool.restore(&path, version, Some(latest)).await {
                Ok(done) => done,
                Err(contextq_memory_tool::Error::Precondition { .. }) => bail!(
                    "{path} changed after it was read (its newest version is no longer {latest}); nothing was changed: run `history {path}` and restore again"
                ),
                Err(e) => return Err(e.into()),
            };
            let said = match done {
                Restored::Rewrote => format!("Restored {path} to version {version}"),
                Restored::Recreated => format!("Recreated {path} as of version {version}"),
                Restored::Deleted => format!("Deleted {path}, as at version {version}"),
                Restored::Unchanged => {
                    format!("{path} already is as at version {version}: nothing was changed")
                }
            };
            let now = tool.history(&path).await.ok().map(|h| h[0].version);
            match (done, now) {
                (Restored::Unchanged, _) | (_, None) => writeln!(out, "{said}.")?,
                (_, Some(n)) => writeln!(out, "{said} (now version {n}).")?,
            }
        }
        Command::RestoreTree { dir, at, dry_run } => {
            let when = chrono::DateTime::parse_from_rfc3339(&at)?.with_timezone(&chrono::Utc);
            let plan = match tool.restore_plan(&dir, when).await {
                Ok(plan) => plan,
                Err(e) if matches!(e.contextq(), Some(ContextQError::OutsideWorkspace { .. })) => {
                    bail!(
                        "{dir} spans workspaces here (each first folder under /memories is a ContextQ workspace with its own history): restore one workspace, e.g. `restore /memories/default --at {at}`, or a directory in one"
                    )
                }
                Err(e) => return Err(e.into()),
            };
            write!(out, "{}", plan_text(&plan))?;
            if dry_run || plan.changes().next().is_none() {
                if dry_run {
                    writeln!(out, "Dry run: nothing was changed.")?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            out.flush()?;
            if !confirmed(yes, &format!("Restore {dir} to {at} as planned above?"))? {
                writeln!(out, "Nothing was changed.")?;
                return Ok(ExitCode::FAILURE);
            }
            drop(out);
            let total = plan.changes().count() as u64;
            let bar = if std::io::stderr().is_terminal() && total >= 20 {
                indicatif::ProgressBar::new(total)
            } else {
                indicatif::ProgressBar::hidden()
            };
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} files {eta}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let report = tool
                .restore_tree(&plan, |done, _| bar.set_position(done as u64))
                .await?;
            bar.finish_and_clear();
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "Done: {} reverted, {} recreated, {} removed.",
                report.done(StepAction::Revert),
                report.done(StepAction::Recreate),
                report.done(StepAction::Remove)
            )?;
            for step in report.conflicts() {
                writeln!(
                    out,
                    "Skipped {}: it changed after the plan was made (nothing was written to it).",
                    step.path.normalized()
                )?;
            }
            for (step, e) in report.failures() {
                writeln!(out, "Failed {}: {e}", step.path.normalized())?;
            }
            for (step, outcome) in &report.steps {
                if let StepOutcome::Failed(contextq_memory_tool::Error::OutcomeUnknown { .. }) =
                    outcome
                {
                    writeln!(
                        out,
                        "{} may or may not have been written: check it with `history`.",
                        step.path.normalized()
                    )?;
                }
            }
            if !report.complete() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Redact {
            path,
            what,
            dry_run,
        } => {
            let target = match &what {
                Redact::Version(n) => RedactTarget::Version(*n),
                Redact::Matching { text, all_paths } => RedactTarget::Matching {
                    text,
                    all_paths: *all_paths,
                },
            };
            // The plan first, then the redaction; the server checks again under its lock.
            let plan = tool.redact(&path, target, true).await?;
            write!(out, "{}", redaction_text(&path, &plan))?;
            if plan.versions.iter().all(|v| v.already) {
                writeln!(out, "Nothing to redact.")?;
                return Ok(ExitCode::SUCCESS);
            }
            if dry_run {
                writeln!(out, "Dry run: nothing was redacted.")?;
                return Ok(ExitCode::SUCCESS);
            }
            out.flush()?;
            if !confirmed(
                yes,
                "Redact these versions for good (their content cannot be brought back)?",
            )? {
                writeln!(out, "Nothing was redacted.")?;
                return Ok(ExitCode::FAILURE);
            }
            let done = tool.redact(&path, target, false).await?;
            writeln!(
                out,
                "Redacted {} version{}: {}.",
                done.newly_redacted(),
                if done.newly_redacted() == 1 { "" } else { "s" },
                done.versions
                    .iter()
                    .filter(|v| !v.already)
                    .map(|v| format!("{} version {}", shown(&path, v), v.version))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
            if done.wal_truncated == Some(false) {
                writeln!(
                    out,
                    "The database's write-ahead log could not be truncated now (another process reads it); its next checkpoint removes the old text from it."
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn shown(path: &str, v: &contextq_memory_tool::contextq::redaction::RedactedFileVersion) -> String {
    v.path
        .as_ref()
        .map_or_else(|| path.to_string(), |p| p.normalized())
}

/// A redaction's plan as people read it: every version it takes.
pub fn redaction_text(path: &str, plan: &RedactionReport) -> String {
    let mut text = format!(
        "Redact {} version{} of {path}:\n",
        plan.versions.len(),
        if plan.versions.len() == 1 { "" } else { "s" }
    );
    for v in &plan.versions {
        text.push_str(&format!(
            "  {} version {} ({}, {}, {}){}\n",
            shown(path, v),
            v.version,
            v.action,
            rfc3339(&v.at),
            if v.already {
                "already redacted".to_string()
            } else {
                format!("{} bytes", v.size)
            },
            v.sha256
                .as_deref()
                .map(|h| format!(" sha256 {}", &h[..h.len().min(12)]))
                .unwrap_or_default()
        ));
    }
    text
}

/// Refuses a redacted version, whose content is gone: it cannot be shown, compared or restored
/// (the library's check, with what a person can do next).
fn redacted(path: &str, v: &FileVersion) -> Result<()> {
    let parsed = contextq_memory_tool::MemoryPath::parse(path)?;
    v.require_content(&parsed).map_err(|e| {
        anyhow::anyhow!(
            "{e} (its SHA-256 was {}); `history {path}` lists the others",
            v.sha256.as_deref().unwrap_or("not recorded")
        )
    })
}

async fn newest(tool: &ContextQMemoryTool, path: &str) -> Result<u64> {
    Ok(tool.history(path).await?[0].version)
}

/// `history`'s table, newest first.
pub fn history_table(versions: &[FileVersion]) -> String {
    let mut rows = vec![[
        "VERSION".to_string(),
        "TIME".to_string(),
        "ACTION".to_string(),
        "SIZE".to_string(),
        "KEY".to_string(),
    ]];
    for v in versions {
        rows.push([
            v.version.to_string(),
            rfc3339(&v.at),
            match v.restored_from {
                Some(n) => format!("restore of {n}"),
                None => v.action.to_string(),
            },
            if v.action == Action::Delete {
                "-".to_string()
            } else if v.redacted_at.is_some() {
                "redacted".to_string()
            } else {
                v.size.to_string()
            },
            match (&v.key, &v.key_name) {
                (Some(key), Some(name)) => format!("{name} ({key})"),
                (Some(key), None) => key.clone(),
                (None, _) => "(operator)".into(),
            },
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A unified diff of two versions (a delete is empty content), with ANSI colour when `colour`.
pub fn unified_diff(path: &str, old: &FileVersion, new: &FileVersion, colour: bool) -> String {
    let a = old.content.as_deref().unwrap_or("");
    let b = new.content.as_deref().unwrap_or("");
    let diff = similar::TextDiff::from_lines(a, b);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!(
                "{path}@{} ({}, {})",
                old.version,
                old.action,
                rfc3339(&old.at)
            ),
            &format!(
                "{path}@{} ({}, {})",
                new.version,
                new.action,
                rfc3339(&new.at)
            ),
        )
        .to_string();
    if text.is_empty() {
        return format!(
            "versions {} and {} of {path} have the same content\n",
            old.version, new.version
        );
    }
    if !colour {
        return text;
    }
    text.lines()
        .map(|line| {
            let code = if line.starts_with("+++") || line.starts_with("---") {
                "1"
            } else if line.starts_with('+') {
                "32"
            } else if line.starts_with('-') {
                "31"
            } else if line.starts_with("@@") {
                "36"
            } else {
                ""
            };
            if code.is_empty() {
                format!("{line}\n")
            } else {
                format!("\x1b[{code}m{line}\x1b[0m\n")
            }
        })
        .collect()
}

/// A restore plan as people read it.
pub fn plan_text(plan: &RestorePlan) -> String {
    let mut text = format!(
        "Restore {} to {}:\n",
        plan.dir.normalized(),
        rfc3339(&plan.at)
    );
    let width = plan
        .steps
        .iter()
        .filter(|s| s.action != StepAction::Unchanged)
        .map(|s| s.path.normalized().chars().count())
        .max()
        .unwrap_or(0);
    for step in &plan.steps {
        let (verb, note) = match step.action {
            StepAction::Revert => ("revert", format!("to version {}", step.target.unwrap_or(0))),
            StepAction::Recreate => (
                "recreate",
                format!("as at version {}", step.target.unwrap_or(0)),
            ),
            StepAction::Remove => ("remove", "created since".to_string()),
            StepAction::Unchanged => continue,
            StepAction::Unknown => (
                "unknown",
                "what it was then is not kept; left as it is".to_string(),
            ),
            StepAction::Redacted => (
                "redacted",
                format!(
                    "version {} was redacted; left as it is",
                    step.target.unwrap_or(0)
                ),
            ),
        };
        text.push_str(&format!(
            "  {verb:<9} {:<width$}  ({note})\n",
            step.path.normalized()
        ));
    }
    let changes = plan.changes().count();
    text.push_str(&format!(
        "{changes} change{}, {} unchanged, {} unknown{}.\n",
        if changes == 1 { "" } else { "s" },
        plan.count(StepAction::Unchanged),
        plan.count(StepAction::Unknown),
        match plan.count(StepAction::Redacted) {
            0 => String::new(),
            n => format!(", {n} redacted"),
        }
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_people_write_them() {
        use chrono::TimeZone;
        let now = chrono::Utc.with_ymd_and_hms(2026, 12, 4, 12, 0, 0).unwrap();
        for (text, want) in [
            ("2026-12-03T10:00:00Z", "2026-12-03T10:00:00.000Z"),
            ("2026-12-03T11:00:00+01:00", "2026-12-03T10:00:00.000Z"),
            ("2026-12-03T10:00", "2026-12-03T10:00:00.000Z"),
            ("2026-12-03 10:00", "2026-12-03T10:00:00.000Z"),
            ("2026-12-03", "2026-12-03T00:00:00.000Z"),
            ("10 minutes ago", "2026-12-04T11:50:00.000Z"),
            ("2h ago", "2026-12-04T10:00:00.000Z"),
            ("1 day ago", "2026-12-03T12:00:00.000Z"),
            ("30s ago", "2026-12-04T11:59:30.000Z"),
        ] {
            assert_eq!(parse_when(text, now).unwrap(), want, "{text}");
        }
        for bad in ["yesterday", "10 parsecs ago", "2026-13-01", ""] {
            let e = parse_when(bad, now).unwrap_err().to_string();
            assert!(e.contains("10 minutes ago"), "{bad}: {e}");
        }
    }

    fn v(n: u64, action: Action, content: Option<&str>) -> FileVersion {
        FileVersion {
            version: n,
            action,
            at: format!("2026-12-03T10:00:0{n}.000Z").parse().unwrap(),
            size: content.map_or(0, |c| c.len() as u64),
            key: Some("sk_live_…abcd".into()),
            key_name: None,
            restored_from: None,
            content: content.map(str::to_string),
            redacted_at: None,
            sha256: None,
        }
    }

    #[test]
    fn the_table_lines_up() {
        let t = history_table(&[
            v(2, Action::Delete, None),
            v(1, Action::Create, Some("hello\n")),
        ]);
        assert_eq!(
            t,
            "VERSION  TIME                      ACTION  SIZE  KEY\n\
             2        2026-12-03T10:00:02.000Z  delete  -     sk_live_…abcd\n\
             1        2026-12-03T10:00:01.000Z  create  6     sk_live_…abcd"
        );
    }

    #[test]
    fn the_table_names_keys_and_restores() {
        let restored = FileVersion {
            key_name: Some("billing-agent".into()),
            restored_from: Some(1),
            ..v(3, Action::Restore, Some("hello\n"))
        };
        let t = history_table(&[restored, v(1, Action::Create, Some("hello\n"))]);
        assert_eq!(
            t,
            "VERSION  TIME                      ACTION        SIZE  KEY\n\
             3        2026-12-03T10:00:03.000Z  restore of 1  6     billing-agent (sk_live_…abcd)\n\
             1        2026-12-03T10:00:01.000Z  create        6     sk_live_…abcd"
        );
    }

    #[test]
    fn diffs_are_unified_and_coloured_only_when_asked() {
        let a = v(1, Action::Create, Some("keep\nold\n"));
        let b = v(2, Action::Update, Some("keep\nnew\n"));
        let plain = unified_diff("/memories/a.md", &a, &b, false);
        assert!(
            plain.starts_with("--- /memories/a.md@1 (create, "),
            "{plain}"
        );
        assert!(plain.contains("\n-old\n+new\n"), "{plain}");
        assert!(!plain.contains('\x1b'));
        let coloured = unified_diff("/memories/a.md", &a, &b, true);
        assert!(coloured.contains("\x1b[31m-old\x1b[0m"), "{coloured}");
        assert!(coloured.contains("\x1b[32m+new\x1b[0m"), "{coloured}");
        let same = unified_diff("/memories/a.md", &a, &a, false);
        assert!(same.contains("same content"));
        // A delete compares as empty content.
        let gone = unified_diff("/memories/a.md", &b, &v(3, Action::Delete, None), false);
        assert!(gone.contains("-keep\n-new\n"), "{gone}");
    }
}
