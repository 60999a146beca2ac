//! The binaries' logs (`contextq-server`, `contextq-memory`): on stderr, filtered by `RUST_LOG`
//! (else the binary's default), colour only on a terminal so that piped or redirected logs stay
//! plain text. One place, so that both binaries log alike.

/// Installs the global subscriber; `default_filter` applies when `RUST_LOG` is not set.
pub fn init(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
