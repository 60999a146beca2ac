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

/// Installs the global subscriber; `default_filter` applies when `RUST_LOG` is not set.
pub fn init(default_filter: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
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
