//! Standard output that a closed pipe stops cleanly: `contextq-memory demo | head -3` ends the
//! command with one line on stderr and exit code 1, as `exec` does, never a panic (Rust ignores
//! SIGPIPE, so `println!` panics on a closed pipe).

use std::io::Write;

/// Writes one line to stdout; a closed stdout stops the process ([`closed`]).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .is_err()
    {
        closed();
    }
}

/// The one message for a stdout that cannot be written (a reader that went away, most often),
/// then exit code 1. Whatever was written stays written: every write the command made before is
/// committed (the store is crash-safe).
pub fn closed() -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "contextq-memory: stopped: the output was closed (broken pipe)"
    );
    std::process::exit(1)
}

/// Whether an error (anywhere in its chain) is a write to a closed pipe.
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `println!` that a closed stdout stops cleanly ([`line`](fn@line)).
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
