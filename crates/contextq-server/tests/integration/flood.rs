//! A full connection table must not lock legitimate clients out: the release binary, started
//! with a descriptor limit it cannot raise, is flooded with more idle connections than it may
//! hold (the attacker reopens each one the server closes), and a legitimate client must still be
//! served, well before the header read timeout (20 s) would have freed a slot.
//!
//! The database plays no part in accepting connections, so this runs on SQLite only. Figures:
//! `cargo test -p contextq-server --test integration flood:: -- --nocapture` prints them
//! (docs/reliability.md, "Hostile clients").

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Plan, Scope, admin};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");

/// The server process, killed when the test ends (also when it fails).
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server binary with `RLIMIT_NOFILE` set to `limit`, soft and hard (so it cannot raise it).
fn spawn_server(db: &str, limit: u64) -> (Spawned, String) {
    // The shell lowers the soft limit, then the hard one, and becomes the server.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -Sn {limit} && ulimit -Hn {limit} && exec \"$0\" \"$@\""
        ))
        .arg(BIN)
        .args(["serve", "--database-url", db, "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim();
    (
        Spawned(child),
        url.trim_start_matches("http://").to_string(),
    )
}

/// What the attackers saw.
#[derive(Default)]
struct Counts {
    connected: AtomicU64,
    failed: AtomicU64,
    closed: AtomicU64,
}

/// Opens `connections` connections that never send a byte, one after the other, and returns
/// once all have been opened; each is held by an attacker task that opens a new one as soon as
/// the server closes it, until `stop` is set.
async fn flood(addr: &str, connections: usize, stop: Arc<AtomicBool>, counts: Arc<Counts>) {
    for _ in 0..connections {
        let first = loop {
            match TcpStream::connect(addr).await {
                Ok(s) => break s,
                Err(_) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        counts.connected.fetch_add(1, Ordering::Relaxed);
        let addr = addr.to_string();
        let stop = stop.clone();
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut held = Some(first);
            let mut buf = [0u8; 64];
            while !stop.load(Ordering::Relaxed) {
                let mut s = match held.take() {
                    Some(s) => s,
                    None => match TcpStream::connect(&addr).await {
                        Ok(s) => {
                            counts.connected.fetch_add(1, Ordering::Relaxed);
                            s
                        }
                        Err(_) => {
                            counts.failed.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    },
                };
                // Held until the server closes it (or the test ends).
                loop {
                    tokio::select! {
                        read = s.read(&mut buf) => match read {
                            Ok(0) | Err(_) => break,
                            Ok(_) => continue,
                        },
                        () = tokio::time::sleep(Duration::from_millis(200)) => {
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                        }
                    }
                }
                counts.closed.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// One flood at a time: the two share this machine's cores and its loopback.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn legitimate_clients_are_served_during_a_flood(fd_limit: u64, connections: usize) {
    let _alone = ONE_AT_A_TIME.lock().await;
    contextq_server::listen::raise_fd_limit();
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let db = database.open(&Default::default()).await;
    let tenant = admin::create_tenant(&db, "flood", Plan::Free)
        .await
        .unwrap();
    let key = admin::create_key(&db, &tenant, None, &[Scope::Read])
        .await
        .unwrap();
    admin::create_workspace(&db, &tenant, "ws", "ws")
        .await
        .unwrap();
    db.close().await;
    let (server, addr) = spawn_server(&database.url, fd_limit);

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let flooding = Instant::now();
    flood(&addr, connections, stop.clone(), counts.clone()).await;
    eprintln!(
        "flood of {connections}: all opened after {:?}, {} closed by the server so far",
        flooding.elapsed(),
        counts.closed.load(Ordering::Relaxed)
    );
    // Let the server see the last of them.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        // Half the header read timeout (20 s), which freed slots before: a client locked out
        // until then fails. (Under a loaded 2-core machine a request waited up to 4.1 s behind
        // the attackers' reconnections in the accept queue; 5 s here failed once in CI.)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut latencies = Vec::new();
    for i in 0..20 {
        let started = Instant::now();
        let answer = client
            .get(format!("http://{addr}/api/workspaces"))
            .bearer_auth(&key.api_key)
            .send()
            .await;
        let status = answer.map(|r| r.status().as_u16());
        assert_eq!(
            status.as_ref().ok(),
            Some(&200),
            "request {i} during a flood of {connections} idle connections (fd limit {fd_limit}): {status:?}"
        );
        latencies.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    latencies.sort();
    let closed = counts.closed.load(Ordering::Relaxed);
    eprintln!(
        "flood of {connections} idle connections, fd limit {fd_limit}: 20 legitimate requests, \
         median {:?}, max {:?}; attackers connected {} times ({} refused), the server closed {closed}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        counts.connected.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed),
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_a_descriptor_limit_of_1024_does_not_lock_clients_out() {
    legitimate_clients_are_served_during_a_flood(1024, 1100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_default_cap_does_not_lock_clients_out() {
    // Room for the default cap (4,096) and the reserved descriptors.
    legitimate_clients_are_served_during_a_flood(8192, 4200).await;
}
