//! The binaries' logs (`contextq-server`, `contextq-memory`): on stderr, filtered by `RUST_LOG`
//! (else the binary's default), as text (colour only on a terminal, so that piped or redirected
//! logs stay plain) or as one JSON object per line (`--log-format json`, for a log collector).
//! One place, so that both binaries log alike.

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (time, level, target, fields, the request's span).
    Json,
}

/// The binaries' `--log-format` flag (`#[command(flatten)]` into each command line).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LogArgs {
    /// How logs are written on stderr: text, or json (one object per line, for a log collector).
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// Libraries whose own lines (rmcp's session notes, hyper's, sqlx's statements, tower-http's
/// failures, which the request log already has) are held at `warn` unless `RUST_LOG` names them:
/// an operator's log holds this program's lines, and rmcp's debug and trace lines dump whole
/// messages (file contents included), which a general `RUST_LOG=debug` must never write.
const LIBRARIES: &[&str] = &["rmcp", "hyper", "h2", "sqlx", "tower_http", "reqwest"];

/// The format the subscriber was installed with ([`notice`] follows it).
static FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Installs the global subscriber; `default_filter` applies when `RUST_LOG` is not set.
pub fn init(default_filter: &str, format: LogFormat) {
    let _ = FORMAT.set(format);
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref(), default_filter);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}

/// One line for whoever started the program (where it listens, a sign-in link), on stderr
/// whatever the filter: as it is with text logs, as a JSON object like the subscriber's
/// (`timestamp`, `level`, `fields.message`, `target`) with `--log-format json`, so that every
/// line a collector reads is JSON.
pub fn notice(message: &str) {
    line("INFO", message);
}

/// [`notice`] for the error a program stops with (`ERROR` in JSON; `error: ...` as text).
pub fn fatal(message: &str) {
    line("ERROR", message);
}

fn line(level: &str, message: &str) {
    match FORMAT.get() {
        Some(LogFormat::Json) => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": level,
                "fields": {"message": message},
                "target": "contextq::notice",
            })
        ),
        _ if level == "ERROR" => eprintln!("error: {message}"),
        _ => eprintln!("{message}"),
    }
}

/// The filter of `rust_log` (else `default_filter`), with [`LIBRARIES`] held at `warn` unless
/// it names them.
fn filter(rust_log: Option<&str>, default_filter: &str) -> tracing_subscriber::EnvFilter {
    let spec = rust_log
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(default_filter);
    let mut filter = tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    for target in LIBRARIES {
        if !spec.contains(target)
            && let Ok(directive) = format!("{target}=warn").parse()
        {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_stay_at_warn_unless_named() {
        let held = |f: tracing_subscriber::EnvFilter| {
            let text = f.to_string();
            LIBRARIES
                .iter()
                .all(|l| text.contains(&format!("{l}=warn")))
        };
        assert!(held(filter(Some("trace"), "warn")));
        assert!(held(filter(None, "info")));
        let named = filter(Some("rmcp=trace"), "warn").to_string();
        assert!(
            named.contains("rmcp=trace") && !named.contains("rmcp=warn"),
            "{named}"
        );
    }
}
