//! Through a primary failover without an error, on a real PostgreSQL HA cluster on loopback
//! ports: etcd, two PostgreSQL 15 nodes managed by Patroni with synchronous replication
//! (`synchronous_mode: true`), and HAProxy sending connections to whichever node Patroni's REST
//! API reports as primary. One contextq-server on the HAProxy address; four memory tools create
//! files; the primary's Patroni and PostgreSQL are killed with SIGKILL and Patroni promotes the
//! synchronous standby. Asserted: every tool result is the command's real outcome (no error, no
//! "did not confirm"), every acknowledged file is there, writes resume without restarting the
//! server, a key revoked after the failover is refused, the audit log verifies; then the old
//! primary rejoins as a standby (pg_rewind) and a second failover back passes the same checks.
//! Every process and directory it started is removed, also when it fails.
//!
//! Needs `patroni`, `etcd` and `haproxy` (Debian's `patroni`, `etcd-server`, `haproxy`), the
//! PostgreSQL 15 binaries and root (the nodes run as the `postgres` user). Without them it says
//! so and passes, unless `CONTEXTQ_HA_TESTS=required` (CI). The configuration is the one
//! docs/team.md documents.

#![cfg(unix)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::handle;
use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, RetryConfig};
use contextq_server::api::ServerConfig;
use contextq_server::testing::{TestDatabase, TestServer};
use contextq_server::{Backend, DbOptions, Plan, Scope, admin};
use serde_json::{Value, json};

/// Writers during each failover.
const CLIENTS: usize = 4;

/// A free loopback port (bound, then released for the process that takes it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The `postgres` user's uid and gid, from /etc/passwd.
fn postgres_user() -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:"))?;
    let f: Vec<&str> = line.split(':').collect();
    Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
}

/// The newest PostgreSQL's binaries (`/usr/lib/postgresql/N/bin`).
fn postgres_bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("postgres").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// What the cluster needs, or why it cannot run here.
fn prerequisites() -> Result<((u32, u32), PathBuf), String> {
    for p in ["patroni", "etcd", "haproxy"] {
        if !on_path(p) {
            return Err(format!(
                "{p} is not installed (apt-get install patroni etcd-server haproxy)"
            ));
        }
    }
    let user = postgres_user().ok_or("no postgres user")?;
    let bin = postgres_bin_dir().ok_or("no PostgreSQL binaries in /usr/lib/postgresql")?;
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if !root {
        return Err("not root (the nodes run as the postgres user)".into());
    }
    Ok((user, bin))
}

/// A spawned process in a process group of its own, killed with its group when dropped.
struct Proc(Child);

impl Proc {
    fn kill(&mut self) {
        // Once reaped, its pid (and group id) may belong to someone else: killed once only.
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        let pid = self.0.id();
        // `--` first: procps' kill reads `-KILL -1234` as `kill(-1, ...)`, every process.
        if pid > 1 {
            let _ = Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One Patroni node: its settings and, while it runs, its process.
struct Node {
    name: &'static str,
    rest: u16,
    pg: u16,
    data: PathBuf,
    config: PathBuf,
    process: Option<Proc>,
}

/// The cluster; everything it started is killed and its directory removed when dropped.
struct Cluster {
    dir: PathBuf,
    user: (u32, u32),
    etcd: Option<Proc>,
    haproxy: Option<Proc>,
    nodes: Vec<Node>,
    /// HAProxy's address: the primary, whichever it is.
    port: u16,
}

impl Cluster {
    fn start(user: (u32, u32), bin: &Path) -> Cluster {
        let dir = std::env::temp_dir().join(format!("cqha-{:08x}", fastrand::u32(..)));
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(user.0), Some(user.1)).unwrap();
        let (etcd_client, etcd_peer) = (free_port(), free_port());
        let mut cluster = Cluster {
            dir: dir.clone(),
            user,
            etcd: None,
            haproxy: None,
            nodes: Vec::new(),
            port: free_port(),
        };
        cluster.etcd = Some(cluster.spawn(
            Command::new("etcd").args([
                "--name",
                "e1",
                "--data-dir",
                &dir.join("etcd").display().to_string(),
                "--listen-client-urls",
                &format!("http://127.0.0.1:{etcd_client}"),
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{etcd_client}"),
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{etcd_peer}"),
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{etcd_peer}"),
                "--initial-cluster",
                &format!("e1=http://127.0.0.1:{etcd_peer}"),
            ]),
            "etcd",
            false,
        ));
        for name in ["n1", "n2"] {
            let (rest, pg) = (free_port(), free_port());
            let data = dir.join(name);
            let config = dir.join(format!("{name}.yml"));
            std::fs::write(
                &config,
                patroni_config(name, rest, pg, &data, &dir, etcd_client, bin),
            )
            .unwrap();
            cluster.nodes.push(Node {
                name,
                rest,
                pg,
                data,
                config,
                process: None,
            });
        }
        let haproxy = dir.join("haproxy.cfg");
        std::fs::write(&haproxy, haproxy_config(cluster.port, &cluster.nodes)).unwrap();
        cluster.haproxy = Some(cluster.spawn(
            Command::new("haproxy").args(["-db", "-f", &haproxy.display().to_string()]),
            "haproxy",
            false,
        ));
        // The first node bootstraps the cluster, then the second joins as its standby.
        cluster.start_node(0);
        cluster.wait_for("n1 to lead", Duration::from_secs(90), |c| {
            c.leader().as_deref() == Some("n1")
        });
        cluster.start_node(1);
        cluster.wait_for(
            "n2 to stream as the synchronous standby",
            Duration::from_secs(90),
            |c| c.sync_standby().as_deref() == Some("n2"),
        );
        cluster
    }

    /// `command` in a process group of its own, its output in the cluster's directory;
    /// as the postgres user when `as_postgres`.
    fn spawn(&self, command: &mut Command, log: &str, as_postgres: bool) -> Proc {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{log}.log")))
            .unwrap();
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0);
        if as_postgres {
            command
                .uid(self.user.0)
                .gid(self.user.1)
                .env("HOME", &self.dir);
            std::os::unix::fs::chown(
                self.dir.join(format!("{log}.log")),
                Some(self.user.0),
                Some(self.user.1),
            )
            .unwrap();
        }
        Proc(
            command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {log}: {e}")),
        )
    }

    fn start_node(&mut self, i: usize) {
        let config = self.nodes[i].config.clone();
        std::os::unix::fs::chown(&config, Some(self.user.0), Some(self.user.1)).unwrap();
        let name = self.nodes[i].name;
        let process = self.spawn(Command::new("patroni").arg(&config), name, true);
        self.nodes[i].process = Some(process);
    }

    /// The machine of node `i` lost: its Patroni and its PostgreSQL killed with SIGKILL.
    fn lose_node(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].process.take() {
            p.kill();
        }
        kill_postgres(&self.nodes[i].data);
    }

    /// Patroni's view of the cluster (`GET /cluster` on any node that answers).
    fn members(&self) -> Vec<Value> {
        for node in &self.nodes {
            let Ok(body) = http_get(node.rest, "/cluster") else {
                continue;
            };
            if let Ok(v) = serde_json::from_str::<Value>(&body) {
                return v["members"].as_array().cloned().unwrap_or_default();
            }
        }
        Vec::new()
    }

    fn with_role(&self, role: &str) -> Option<String> {
        self.members()
            .iter()
            .find(|m| m["role"] == role && m["state"] != "stopped")
            .and_then(|m| m["name"].as_str().map(str::to_string))
    }

    fn leader(&self) -> Option<String> {
        self.with_role("leader")
    }

    fn sync_standby(&self) -> Option<String> {
        self.members()
            .iter()
            .find(|m| {
                m["role"] == "sync_standby"
                    && matches!(m["state"].as_str(), Some("running" | "streaming"))
            })
            .and_then(|m| m["name"].as_str().map(str::to_string))
    }

    fn index_of(&self, name: &str) -> usize {
        self.nodes.iter().position(|n| n.name == name).unwrap()
    }

    fn wait_for(&self, what: &str, within: Duration, done: impl Fn(&Cluster) -> bool) {
        let started = Instant::now();
        while !done(self) {
            if started.elapsed() > within {
                let logs: String = ["n1", "n2", "etcd", "haproxy"]
                    .iter()
                    .map(|l| {
                        let text = std::fs::read_to_string(self.dir.join(format!("{l}.log")))
                            .unwrap_or_default();
                        let tail: Vec<&str> = text.lines().rev().take(15).collect();
                        format!(
                            "--- {l}.log\n{}\n",
                            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                        )
                    })
                    .collect();
                panic!(
                    "waited {within:?} for {what}; members: {:?}\n{logs}",
                    self.members()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The admin URL through HAProxy.
    fn url(&self) -> String {
        format!(
            "postgres://postgres:postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.haproxy.take();
        for i in 0..self.nodes.len() {
            self.lose_node(i);
        }
        self.etcd.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// SIGKILL for the PostgreSQL whose data directory is `data` (its postmaster, whose backends
/// then exit on their own, and anything still holding the directory).
fn kill_postgres(data: &Path) {
    let pid = std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<u32>().ok()));
    if let Some(pid) = pid.filter(|p| *p > 1) {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    let _ = Command::new("pkill")
        .args(["-KILL", "-f", "--", &format!("-D {}", data.display())])
        .status();
}

/// A plain HTTP GET to a loopback port, its body when the status is 200.
fn http_get(port: u16, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no body")?;
    if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") {
        Ok(body.to_string())
    } else {
        Err(head.lines().next().unwrap_or_default().to_string())
    }
}

/// A Patroni node: synchronous replication (an acknowledged write is on the standby before it
/// is acknowledged, so it survives the primary's loss), failover after a 10 s leader TTL, and
/// pg_rewind so that a lost primary can rejoin as a standby.
fn patroni_config(
    name: &str,
    rest: u16,
    pg: u16,
    data: &Path,
    dir: &Path,
    etcd: u16,
    bin: &Path,
) -> String {
    format!(
        r#"scope: cqha
name: {name}
restapi:
  listen: 127.0.0.1:{rest}
  connect_address: 127.0.0.1:{rest}
etcd3:
  hosts: 127.0.0.1:{etcd}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_log_hints: "on"
        max_connections: 100
  initdb:
  - encoding: UTF8
  - data-checksums
  pg_hba:
  - host replication replicator 127.0.0.1/32 md5
  - host all all 127.0.0.1/32 md5
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {dir}/pgpass-{name}
  authentication:
    replication: {{username: replicator, password: rep-pass}}
    superuser: {{username: postgres, password: postgres}}
    rewind: {{username: rewinder, password: rew-pass}}
  parameters:
    unix_socket_directories: {dir}
"#,
        data = data.display(),
        bin = bin.display(),
        dir = dir.display(),
    )
}

/// HAProxy: connections go to the node whose Patroni answers 200 on `/primary`, checked every
/// 500 ms; a node marked down has its sessions shut, so that no client keeps writing to a
/// demoted primary.
fn haproxy_config(port: u16, nodes: &[Node]) -> String {
    let servers: String = nodes
        .iter()
        .map(|n| {
            format!(
                "    server {} 127.0.0.1:{} check port {}\n",
                n.name, n.pg, n.rest
            )
        })
        .collect();
    format!(
        "global\n    maxconn 200\ndefaults\n    mode tcp\n    timeout connect 2s\n    timeout client 60s\n    \
         timeout server 60s\n    timeout check 1s\nlisten primary\n    bind 127.0.0.1:{port}\n    \
         option httpchk GET /primary\n    http-check expect status 200\n    \
         default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions\n{servers}"
    )
}

/// What one writer did: each create and its result, and when it was answered.
type Results = Vec<(String, Result<String, String>, Instant)>;

/// `CLIENTS` memory tools creating files (`/memories/r{round}-c{k}-{i}.md`) until `stop`.
async fn writers(url: String, key: String, round: u32, stop: Arc<AtomicBool>) -> Results {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let (url, key, stop) = (url.to_string(), key.to_string(), stop.clone());
            tokio::spawn(async move {
                let tool = contextq_memory_tool::contextq_memory_tool(
                    ContextQMemoryToolOptions::new(&key)
                        .base_url(&url)
                        .retry(RetryConfig::default())
                        .workspace("ws"),
                )
                .unwrap();
                let mut done = Results::new();
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let path = format!("/memories/r{round}-c{k}-{i}.md");
                    let r = handle(
                        &tool,
                        json!({"command": "create", "path": path, "file_text": format!("{path} body\n")}),
                    )
                    .await
                    .map_err(|e| e.message().to_string());
                    done.push((path, r, Instant::now()));
                    i += 1;
                }
                done
            })
        })
        .collect();
    let mut all = Results::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// One failover: writers running, the primary lost 1.5 s in, writing on until 3 s after the
/// standby leads; every result the real outcome, every acknowledged file there.
async fn a_failover(cluster: &mut Cluster, server: &TestServer, key: &str, round: u32) -> String {
    let old = cluster.leader().expect("a leader");
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writers(
        server.url().to_string(),
        key.to_string(),
        round,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lost_at = Instant::now();
    let i = cluster.index_of(&old);
    cluster.lose_node(i);
    let new = loop {
        if let Some(l) = cluster.leader().filter(|l| *l != old) {
            break l;
        }
        assert!(
            lost_at.elapsed() < Duration::from_secs(60),
            "no new leader after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let promoted = lost_at.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    let results = writing.await.unwrap();
    let failed: Vec<_> = results.iter().filter(|(_, r, _)| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "round {round}: {} of {} failed: {:?}",
        failed.len(),
        results.len(),
        &failed[..failed.len().min(5)]
    );
    for (path, r, _) in &results {
        assert_eq!(
            r.as_deref().unwrap(),
            format!("File created successfully at: {path}")
        );
    }
    let after = results
        .iter()
        .filter(|(_, _, at)| *at > lost_at + promoted)
        .count();
    assert!(
        after > 0,
        "round {round}: no write answered after the failover"
    );
    // Every acknowledged file is there, with its content.
    for (path, _, _) in &results {
        let ext = format!("mem-tool:ws/{}", path.trim_start_matches("/memories/"));
        let row = crate::common::row(server.url(), key, &ext)
            .await
            .unwrap_or_else(|| panic!("{path} acknowledged but not there"));
        assert_eq!(row["content"], format!("{path} body\n"), "{path}");
    }
    format!(
        "round {round}: {old} lost, {new} leading after {:.1} s; {} creates acknowledged, {} of them after the failover, none failed",
        promoted.as_secs_f64(),
        results.len(),
        after
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_ride_out_two_primary_failovers() {
    let (user, bin) = match prerequisites() {
        Ok(p) => p,
        Err(why) => {
            contextq_server::testing::skip_unless_required(
                "CONTEXTQ_HA_TESTS",
                &format!("the HA cluster cannot run here: {why}"),
            );
            return;
        }
    };
    let mut cluster = tokio::task::spawn_blocking(move || Cluster::start(user, &bin))
        .await
        .unwrap();
    let database = TestDatabase::create(Backend::Postgres, Some(&cluster.url()))
        .await
        .expect("a database on the cluster");
    let url = format!(
        "{}?sslmode=disable",
        database.url.split('?').next().unwrap()
    );
    let server = TestServer::start_over(
        database,
        &url,
        ServerConfig::default(),
        DbOptions::default(),
    )
    .await;
    let tenant = server
        .tenant(
            Plan::Unlimited,
            &[Scope::Read, Scope::Write, Scope::Admin],
            "ws",
        )
        .await;
    let mut report = Vec::new();
    for round in 1..=2 {
        report.push(a_failover(&mut cluster, &server, &tenant.api_key, round).await);
        // A key revoked after the failover is refused (the revocation listener reconnected,
        // or keys are looked up until it has).
        let spare = admin::create_key(&server.db, &tenant.tenant_id, None, &[Scope::Read])
            .await
            .unwrap();
        let http = reqwest::Client::new();
        let status = |key: String| {
            let http = http.clone();
            let url = format!("{}/api/contexts", server.url());
            async move {
                http.get(url)
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(status(spare.api_key.clone()).await, 200);
        admin::revoke_key(&server.db, &spare.key_id).await.unwrap();
        let revoked = Instant::now();
        while status(spare.api_key.clone()).await != 401 {
            assert!(
                revoked.elapsed() < Duration::from_secs(5),
                "round {round}: a revoked key still works"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        report.push(format!(
            "round {round}: a revoked key refused after {} ms",
            revoked.elapsed().as_millis()
        ));
        let verified = admin::verify_audit(&server.db, Some(&tenant.tenant_id))
            .await
            .unwrap();
        assert!(verified.ok(), "round {round}: {verified:?}");
        if round == 1 {
            // The lost primary rejoins as the synchronous standby (pg_rewind).
            let lost = cluster
                .nodes
                .iter()
                .position(|n| n.process.is_none())
                .unwrap();
            let rejoined = Instant::now();
            cluster.start_node(lost);
            let name = cluster.nodes[lost].name;
            let c = tokio::task::spawn_blocking(move || {
                cluster.wait_for(
                    "the lost primary to rejoin as the synchronous standby",
                    Duration::from_secs(120),
                    |c| c.sync_standby().as_deref() == Some(name),
                );
                cluster
            });
            cluster = c.await.unwrap();
            report.push(format!(
                "{name} rejoined as the synchronous standby after {:.1} s",
                rejoined.elapsed().as_secs_f64()
            ));
        }
    }
    server.stop().await;
    eprintln!("{}", report.join("\n"));
}
