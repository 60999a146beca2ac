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

/// Targets whose debug and trace lines dump whole messages (rmcp's: every MCP request and
/// answer, file contents included): kept at `info` unless `RUST_LOG` names them itself, so that
/// a general `RUST_LOG=debug` never writes memory contents into a log.
const MESSAGE_DUMPERS: &[&str] = &["rmcp"];

/// Installs the global subscriber; `default_filter` applies when `RUST_LOG` is not set.
pub fn init(default_filter: &str, format: LogFormat) {
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

/// The filter of `rust_log` (else `default_filter`), with [`MESSAGE_DUMPERS`] held at `info`
/// unless it names them.
fn filter(rust_log: Option<&str>, default_filter: &str) -> tracing_subscriber::EnvFilter {
    let spec = rust_log
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(default_filter);
    let mut filter = tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    for target in MESSAGE_DUMPERS {
        if !spec.contains(target)
            && let Ok(directive) = format!("{target}=info").parse()
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
    fn message_dumps_stay_off_unless_named() {
        assert_eq!(filter(Some("trace"), "warn").to_string(), "rmcp=info,trace");
        assert_eq!(filter(Some("rmcp=trace"), "warn").to_string(), "rmcp=trace");
        assert_eq!(filter(None, "warn").to_string(), "rmcp=info,warn");
    }
}
