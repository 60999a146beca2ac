//! `contextq-bench trace`: the deterministic command trace that `bench/trace.sh` replays.

use std::io::Write as _;

use anyhow::Result;

/// Writes the deterministic command trace (JSON lines).
#[derive(clap::Args)]
pub(crate) struct Trace {
    #[arg(long, default_value_t = 10_000)]
    commands: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long)]
    out: std::path::PathBuf,
}

impl Trace {
    pub(crate) async fn run(self) -> Result<()> {
        let Trace {
            commands,
            seed,
            out,
        } = self;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&out)?);
        for input in contextq_memory_tool::testing::trace::generate(commands, seed) {
            writeln!(f, "{input}")?;
        }
        f.flush()?;
        eprintln!("wrote {commands} commands to {}", out.display());
        Ok(())
    }
}
