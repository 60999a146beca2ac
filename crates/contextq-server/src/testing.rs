//! Test support shared by this workspace's test suites (feature `test-util`): a fresh database
//! per test on SQLite or PostgreSQL ([`TestDatabase`]), a server on it ([`TestServer`]) with
//! tenants to order, and [`database_tests!`](crate::database_tests), which declares each
//! database test once per database so that a test run names, test by test, the databases it ran
//! on (`sqlite::name`, `postgres::name`).
//!
//! PostgreSQL tests run when the crate's tests were built with `CONTEXTQ_TEST_DATABASE_URL` set
//! (an admin URL such as `postgres://postgres:postgres@127.0.0.1:5432/postgres`; every test gets
//! a database of its own); otherwise they are listed as ignored, with the reason. A crate using
//! the macro needs the three-line build script that turns the variable into the
//! `contextq_postgres` cfg (see this crate's `build.rs`).

pub mod sqlite_counts;

use crate::admin;
use crate::api::{AppState, ServerConfig};
use crate::db::{Backend, Db, DbOptions, create_postgres_database, drop_postgres_database};
use crate::embed::RunningServer;
use contextq_api::{Plan, Scope};

/// The environment variable with a PostgreSQL admin URL for tests.
pub const DATABASE_URL_VAR: &str = "CONTEXTQ_TEST_DATABASE_URL";

/// The name prefix of every PostgreSQL database a [`TestDatabase`] makes; `.ci/run` drops what a
/// killed run left behind by this prefix.
pub const DATABASE_PREFIX: &str = "cqtest_";

/// A database of its own for one test or benchmark: a temporary SQLite file or a new PostgreSQL
/// database, both removed on drop (PostgreSQL's with `DROP DATABASE ... WITH (FORCE)`, so that a
/// long-lived CI server does not collect thousands of them).
#[derive(Debug)]
pub struct TestDatabase {
    /// Its URL, for [`crate::Db::connect`] or a server's `--database-url`.
    pub url: String,
    /// Which backend it is.
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
    /// PostgreSQL: the admin URL it was made with and its name, to drop it.
    postgres: Option<(String, String)>,
}

impl TestDatabase {
    /// A fresh, empty database on `backend`.
    ///
    /// # Panics
    /// When it cannot be made (a test helper: the panic names the cause), in particular for
    /// PostgreSQL when [`DATABASE_URL_VAR`] is not set.
    pub async fn fresh(backend: Backend) -> TestDatabase {
        let admin = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(
                std::env::var(DATABASE_URL_VAR)
                    .ok()
                    .filter(|u| !u.is_empty())
                    .unwrap_or_else(|| {
                        panic!("{DATABASE_URL_VAR} is not set: the PostgreSQL tests need an admin URL such as postgres://postgres:postgres@127.0.0.1:5432/postgres")
                    }),
            ),
        };
        Self::create(backend, admin.as_deref())
            .await
            .unwrap_or_else(|e| {
                panic!("cannot create a test database with {DATABASE_URL_VAR}: {e}")
            })
    }

    /// A pool on this database opened with `options`.
    ///
    /// # Panics
    /// When it cannot be opened (a test helper: the panic names the cause).
    pub async fn open(&self, options: &DbOptions) -> Db {
        Db::connect(&self.url, options)
            .await
            .unwrap_or_else(|e| panic!("cannot open the test database: {e}"))
    }

    /// A fresh, empty database on `backend`; for PostgreSQL, made with the admin URL `admin`
    /// (e.g. `postgres://postgres:postgres@127.0.0.1:5432/postgres`).
    ///
    /// # Errors
    /// When the temporary directory or the database cannot be made, or `admin` is missing or
    /// not a PostgreSQL URL for [`Backend::Postgres`].
    pub async fn create(backend: Backend, admin: Option<&str>) -> crate::Result<TestDatabase> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir()
                    .map_err(|e| crate::Error::Config(format!("no temporary directory: {e}")))?;
                let url = format!("sqlite:{}", dir.path().join("contextq.db").display());
                Ok(TestDatabase {
                    url,
                    backend,
                    _dir: Some(dir),
                    postgres: None,
                })
            }
            Backend::Postgres => {
                let admin = admin.ok_or_else(|| {
                    crate::Error::Config("a PostgreSQL test database needs an admin URL".into())
                })?;
                let name = format!("{DATABASE_PREFIX}{:016x}", fastrand::u64(..));
                let url = create_postgres_database(admin, &name).await?;
                Ok(TestDatabase {
                    url,
                    backend,
                    _dir: None,
                    postgres: Some((admin.to_string(), name)),
                })
            }
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some((admin, name)) = self.postgres.take() else {
            return;
        };
        // Drop runs inside the test's runtime, which cannot be blocked on: a thread of its own
        // with a runtime of its own waits for the DROP.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(drop_postgres_database(&admin, &name))
                .map_err(|e| format!("{name}: {e}"))
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: the test database was not dropped: {e}"),
            Err(_) => eprintln!("warning: dropping the test database panicked"),
        }
    }
}

/// Every scope: read, write, admin.
pub const ALL_SCOPES: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];

/// contextq-server on `127.0.0.1:0` over a fresh [`TestDatabase`], with the pool the test can
/// use for admin calls and direct queries. Stopped (gracefully) by [`TestServer::stop`], or when
/// dropped.
#[derive(Debug)]
pub struct TestServer {
    /// The running server.
    pub server: RunningServer,
    /// The pool (admin calls, direct queries).
    pub db: Db,
    /// Its database (kept alive as long as the server).
    pub database: TestDatabase,
    sign_in: std::sync::Arc<crate::ui::SignInTokens>,
}

/// A tenant made by [`TestServer::tenant`].
#[derive(Debug, Clone)]
pub struct TestTenant {
    /// The tenant's id.
    pub tenant_id: String,
    /// Its key's id.
    pub key_id: String,
    /// Its key.
    pub api_key: String,
}

impl TestServer {
    /// A server with the default configuration.
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, ServerConfig::default()).await
    }

    /// A server with `config`.
    pub async fn start_with(backend: Backend, config: ServerConfig) -> TestServer {
        Self::start_with_options(backend, config, DbOptions::default()).await
    }

    /// A server with `config` over a database opened with `options`.
    pub async fn start_with_options(
        backend: Backend,
        config: ServerConfig,
        options: DbOptions,
    ) -> TestServer {
        let database = TestDatabase::fresh(backend).await;
        let url = database.url.clone();
        Self::start_over(database, &url, config, options).await
    }

    /// A server on a fresh PostgreSQL database that it reaches through an [`OutageProxy`] (to
    /// cut the database away at will), waiting at most `acquire_timeout` for a connection.
    pub async fn behind_outage_proxy(
        acquire_timeout: std::time::Duration,
    ) -> (TestServer, OutageProxy) {
        let database = TestDatabase::fresh(Backend::Postgres).await;
        let proxy = OutageProxy::in_front_of(&database.url).await;
        let options = DbOptions::default().acquire_timeout(acquire_timeout);
        let url = proxy.url().to_string();
        let server = Self::start_over(database, &url, ServerConfig::default(), options).await;
        (server, proxy)
    }

    /// A server over `database` reached at `url` (the database's own, or a proxy's in front of
    /// it, such as an [`OutageProxy`]'s), opened with `options`.
    pub async fn start_over(
        database: TestDatabase,
        url: &str,
        config: ServerConfig,
        options: DbOptions,
    ) -> TestServer {
        let db = Db::connect(url, &options)
            .await
            .unwrap_or_else(|e| panic!("cannot open the test database: {e}"));
        let state = AppState::new(db.clone(), config);
        let sign_in = state.sign_in.clone();
        let server = RunningServer::bind("127.0.0.1:0", state)
            .await
            .unwrap_or_else(|e| panic!("cannot start the test server: {e}"));
        TestServer {
            server,
            db,
            database,
            sign_in,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// The inspector's one-time sign-in tokens of this server.
    pub fn sign_in(&self) -> &crate::ui::SignInTokens {
        &self.sign_in
    }

    /// Which database it runs on.
    pub fn backend(&self) -> Backend {
        self.database.backend
    }

    /// A new tenant on `plan` with a key of `scopes` and the workspace `workspace`.
    pub async fn tenant(&self, plan: Plan, scopes: &[Scope], workspace: &str) -> TestTenant {
        let name = format!("t{:016x}", fastrand::u64(..));
        let tenant_id = admin::create_tenant(&self.db, &name, plan)
            .await
            .expect("a tenant");
        let key = admin::create_key(&self.db, &tenant_id, None, scopes)
            .await
            .expect("a key");
        self.workspace(&tenant_id, workspace).await;
        TestTenant {
            tenant_id,
            key_id: key.key_id,
            api_key: key.api_key,
        }
    }

    /// A new workspace `slug` of a tenant.
    pub async fn workspace(&self, tenant_id: &str, slug: &str) {
        admin::create_workspace(&self.db, tenant_id, slug, slug)
            .await
            .expect("a workspace");
    }

    /// Waits until every key of `tenant_id` has its last use recorded: a key's first request
    /// writes it in the background, after the answer (`store::tenants::touch_key`), so a test
    /// that counts a command's work waits for it first.
    pub async fn until_keys_used(&self, tenant_id: &str) {
        loop {
            let keys = crate::store::tenants::list_keys(&self.db, tenant_id)
                .await
                .expect("the tenant's keys");
            if keys.iter().all(|k| k.last_used_at.is_some()) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Stops the server (in-flight requests finish first).
    pub async fn stop(self) {
        self.server.stop().await.expect("the server stops cleanly");
    }
}

/// For a test that needs something this machine may lack (a browser, strace, an HA cluster):
/// says why it is skipped, and returns, unless `var` is `required` (as CI sets it), where the
/// missing piece fails the test instead.
///
/// # Panics
/// When `var` is `required`.
pub fn skip_unless_required(var: &str, why: &str) {
    assert_ne!(
        std::env::var(var).as_deref(),
        Ok("required"),
        "{var}=required, but {why}"
    );
    eprintln!("skipped: {why}");
}

/// Spawns a server binary (`command`: `contextq-server serve` or `contextq-memory serve`, on
/// `--listen 127.0.0.1:0`) with its stdout piped and its log discarded, and returns it with the
/// first line it prints: the URL it serves.
pub fn spawn_serving(command: &mut std::process::Command) -> (std::process::Child, String) {
    spawn_serving_logged(command, std::process::Stdio::null())
}

/// [`spawn_serving`], its log (stderr) going to `log`.
pub fn spawn_serving_logged(
    command: &mut std::process::Command,
    log: std::process::Stdio,
) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("the server binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("the server prints its URL");
    (child, line.trim().to_string())
}

/// A TCP proxy between a server and its database, for measuring what the network costs: it
/// counts round trips (each time the client speaks after the database has answered) and delays
/// each direction by a fixed time, as a database across a network does.
#[derive(Debug)]
pub struct TcpProxy {
    addr: std::net::SocketAddr,
    turns: std::sync::Arc<std::sync::atomic::AtomicU64>,
    counted: std::sync::Arc<Counted>,
    task: tokio::task::JoinHandle<()>,
}

/// What a [`TcpProxy`] counted besides round trips.
#[derive(Debug, Default)]
struct Counted {
    /// Bytes the client sent.
    bytes_to_database: std::sync::atomic::AtomicU64,
    /// PostgreSQL's `CommandComplete` messages: statements the database ran.
    statements: std::sync::atomic::AtomicU64,
}

impl TcpProxy {
    /// Forwards connections to `upstream`, each byte `one_way` later in each direction.
    pub async fn start(upstream: std::net::SocketAddr, one_way: std::time::Duration) -> TcpProxy {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let turns = Arc::new(AtomicU64::new(0));
        let counter = turns.clone();
        let counted = Arc::new(Counted::default());
        let counts = counted.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                // A client chunk after the database spoke (or the first) starts a round trip.
                let database_spoke = Arc::new(std::sync::atomic::AtomicBool::new(true));
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pipe(
                    cr,
                    sw,
                    one_way,
                    Direction::ToDatabase(counter.clone(), database_spoke.clone(), counts.clone()),
                ));
                tokio::spawn(pipe(
                    sr,
                    cw,
                    one_way,
                    Direction::ToClient(database_spoke, counts.clone(), Frames::default()),
                ));
            }
        });
        TcpProxy {
            addr,
            turns,
            counted,
            task,
        }
    }

    /// The address to connect to instead of the database's.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Round trips so far.
    pub fn round_trips(&self) -> u64 {
        self.turns.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Bytes the clients sent to the database so far.
    pub fn bytes_to_database(&self) -> u64 {
        self.counted
            .bytes_to_database
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// In front of PostgreSQL without TLS (`sslmode=disable`): the statements it ran so far,
    /// one for each `CommandComplete` it sent (each statement of a multi-statement query, each
    /// `EXECUTE`, `BEGIN` and `COMMIT` included).
    pub fn statements(&self) -> u64 {
        self.counted
            .statements
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A proxy in front of the database `url` points at (`postgres://user:pw@host:port/db`),
    /// and `url` pointed at the proxy.
    pub async fn in_front_of(url: &str, one_way: std::time::Duration) -> (TcpProxy, String) {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let hostpath = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        let upstream = database_address(hostpath).await;
        let proxy = TcpProxy::start(upstream, one_way).await;
        let proxied = proxy.url_for(url);
        (proxy, proxied)
    }

    /// `url` (`postgres://user:password@host:port/db`) pointed at this proxy.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (userinfo, hostpath) = match rest.split_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), rest),
        };
        let path = hostpath.find('/').map_or("", |i| &hostpath[i..]);
        // Plain text, so the proxy can read the protocol (and TLS does not add round trips).
        let tls = match path.contains("sslmode=") {
            true => "",
            false if path.contains('?') => "&sslmode=disable",
            false => "?sslmode=disable",
        };
        format!("{scheme}://{userinfo}{}{path}{tls}", self.addr)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What an [`OutageProxy`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OutageMode {
    /// Forwards both ways.
    Up = 0,
    /// Closes every connection and refuses new ones (accepted, then closed at once).
    Down = 1,
    /// Closes a connection when the server sends a `COMMIT`, without forwarding it.
    CutBeforeCommit = 2,
    /// Forwards a `COMMIT`, then closes the connection before the database's answer.
    CutAfterCommit = 3,
    /// As `CutAfterCommit`, then `Down`: the primary lost just after it committed.
    CommitThenDown = 4,
}

/// A PostgreSQL outage to order: a proxy in front of the database whose [`OutageMode`] a test
/// switches. Every connection checks the mode on each chunk (and every 20 ms when idle), so
/// switching to `Down` ends the live ones at once. Connections through it are without TLS, so
/// that it sees each `COMMIT`.
#[derive(Debug)]
pub struct OutageProxy {
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl OutageProxy {
    /// A proxy in front of the database `url` points at (`postgres://user:pw@host:port/db`).
    ///
    /// # Panics
    /// When the address cannot be resolved or no loopback port is free (a test helper).
    pub async fn in_front_of(url: &str) -> OutageProxy {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (userinfo, hostpath) = rest.split_once('@').expect("a URL with a user");
        let upstream = database_address(hostpath).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let path = hostpath.find('/').map_or("", |i| &hostpath[i..]);
        let joint = if path.contains('?') { '&' } else { '?' };
        let url = format!("{scheme}://{userinfo}@{addr}{path}{joint}sslmode=disable");
        let mode = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(OutageMode::Up as u8));
        let shared = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if shared.load(std::sync::atomic::Ordering::SeqCst) == OutageMode::Down as u8 {
                    drop(client);
                    continue;
                }
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(relay_switched(client, server, shared.clone()));
            }
        });
        OutageProxy { mode, url, task }
    }

    /// What it does now (`CommitThenDown` turns itself into `Down`).
    pub fn mode(&self) -> OutageMode {
        OutageMode::from(self.mode.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Switches what it does, for every connection at once.
    pub fn set(&self, mode: OutageMode) {
        self.mode
            .store(mode as u8, std::sync::atomic::Ordering::SeqCst);
    }

    /// The database's URL through this proxy.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for OutageProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways until either side closes or the mode says to cut. A cut closes both
/// sockets (dropped), which the server sees as a reset or an end of stream.
async fn relay_switched(
    mut client: tokio::net::TcpStream,
    mut server: tokio::net::TcpStream,
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
) {
    let (mut to_db, mut to_client) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    // After a forwarded COMMIT in `CutAfterCommit`: drop the database's next answer.
    let mut commit_sent = false;
    let ticker = || tokio::time::sleep(std::time::Duration::from_millis(20));
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let now = OutageMode::from(mode.load(std::sync::atomic::Ordering::SeqCst));
        if now == OutageMode::Down {
            return;
        }
        tokio::select! {
            n = client.read(&mut to_db) => {
                let Ok(n @ 1..) = n else { return };
                let chunk = &to_db[..n];
                let commit = chunk.windows(6).any(|w| w == b"COMMIT");
                match OutageMode::from(mode.load(std::sync::atomic::Ordering::SeqCst)) {
                    OutageMode::Down => return,
                    OutageMode::CutBeforeCommit if commit => return,
                    OutageMode::CutAfterCommit | OutageMode::CommitThenDown if commit => commit_sent = true,
                    _ => {}
                }
                if server.write_all(chunk).await.is_err() {
                    return;
                }
            }
            n = server.read(&mut to_client) => {
                let Ok(n @ 1..) = n else { return };
                if commit_sent {
                    let _ = mode.compare_exchange(
                        OutageMode::CommitThenDown as u8,
                        OutageMode::Down as u8,
                        std::sync::atomic::Ordering::SeqCst,
                        std::sync::atomic::Ordering::SeqCst,
                    );
                    return;
                }
                if mode.load(std::sync::atomic::Ordering::SeqCst) == OutageMode::Down as u8 {
                    return;
                }
                if client.write_all(&to_client[..n]).await.is_err() {
                    return;
                }
            }
            // Wakes an idle connection to see a switch to `Down`.
            _ = ticker() => {}
        }
    }
}

impl From<u8> for OutageMode {
    fn from(v: u8) -> OutageMode {
        match v {
            1 => OutageMode::Down,
            2 => OutageMode::CutBeforeCommit,
            3 => OutageMode::CutAfterCommit,
            4 => OutageMode::CommitThenDown,
            _ => OutageMode::Up,
        }
    }
}

/// Which way a [`pipe`] copies, and what it records.
enum Direction {
    /// Client to database: a chunk after the database spoke starts a round trip.
    ToDatabase(
        std::sync::Arc<std::sync::atomic::AtomicU64>,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::sync::Arc<Counted>,
    ),
    /// Database to client: notes that the database spoke, and counts PostgreSQL's statements.
    ToClient(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::sync::Arc<Counted>,
        Frames,
    ),
}

/// PostgreSQL's messages to a client, framed across chunks (a type byte and a 4-byte length
/// that counts itself), after the one-byte answer to an `SSLRequest` if there was one.
#[derive(Debug, Default)]
struct Frames {
    started: bool,
    header: Vec<u8>,
    skip: usize,
}

impl Frames {
    /// Reads `bytes`; the `CommandComplete` messages that began in them.
    fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut completed = 0;
        if !self.started && !bytes.is_empty() {
            self.started = true;
            if matches!(bytes[0], b'N' | b'S') {
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (5 - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() == 5 {
                if self.header[0] == b'C' {
                    completed += 1;
                }
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]);
                self.skip = (len as usize).saturating_sub(4);
                self.header.clear();
            }
        }
        completed
    }
}

/// Copies one direction, each chunk forwarded `delay` after it arrived (chunks in flight
/// overlap, as on a network). Tokio's timer rounds a sleep up to its next millisecond tick, so
/// the delay added is between `delay` and `delay` + 1 ms: measure it (the bench does).
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: std::time::Duration,
    mut direction: Direction,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, bytes)) = rx.recv().await {
            // No delay: no timer either (tokio's timer has millisecond ticks, so even a zero
            // sleep would cost up to one).
            if !delay.is_zero() {
                tokio::time::sleep_until(at + delay).await;
            }
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match &mut direction {
            Direction::ToDatabase(turns, database_spoke, counted) => {
                counted
                    .bytes_to_database
                    .fetch_add(n as u64, Ordering::SeqCst);
                if database_spoke.swap(false, Ordering::SeqCst) {
                    turns.fetch_add(1, Ordering::SeqCst);
                }
            }
            Direction::ToClient(database_spoke, counted, frames) => {
                counted
                    .statements
                    .fetch_add(frames.feed(&buf[..n]), Ordering::SeqCst);
                database_spoke.store(true, Ordering::SeqCst);
            }
        }
        if tx
            .send((tokio::time::Instant::now(), buf[..n].to_vec()))
            .is_err()
        {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// Declares each named `async fn name(backend: Backend)` as two tests, `sqlite::name` and
/// `postgres::name` (ignored, saying why, unless the crate was built with
/// `CONTEXTQ_TEST_DATABASE_URL` set). Each runs on a multi-threaded runtime.
///
/// ```ignore
/// async fn round_trip(backend: Backend) { /* ... */ }
/// contextq_server::database_tests!(round_trip);
/// ```
#[macro_export]
macro_rules! database_tests {
    ($($name:ident),* $(,)?) => {
        /// The database tests on SQLite (a temporary file each).
        mod sqlite {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Sqlite).await
                }
            )*
        }
        /// The database tests on PostgreSQL (a new database each).
        mod postgres {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(contextq_postgres),
                    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
                )]
                async fn $name() {
                    super::$name($crate::Backend::Postgres).await
                }
            )*
        }
    };
}

/// The address of the database server in a URL's `host:port/database?...` part.
///
/// # Panics
/// When it cannot be resolved (a test helper).
async fn database_address(hostpath: &str) -> std::net::SocketAddr {
    let hostport = hostpath.split(['/', '?']).next().unwrap_or(hostpath);
    tokio::net::lookup_host(hostport)
        .await
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| panic!("cannot resolve the database address {hostport:?}"))
}
