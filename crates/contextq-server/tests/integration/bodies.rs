//! One client cannot hold the budget of bodies in flight: each tenant's bodies take room in its
//! own share first (so a tenant that floods or trickles large bodies makes only itself wait),
//! and a body that arrives slower than the minimum rate is cut with 408 in the envelope. Through
//! real HTTP on SQLite and PostgreSQL: tenant B's writes are all answered while tenant A's bodies
//! are held open or trickled, before any of them is cut; `--nocapture` prints B's latencies
//! (docs/reliability.md, "Hostile clients").

use crate::common;

use std::time::{Duration, Instant};

use common::{ALL, TestServer};
use contextq_server::{Backend, Plan, ServerConfig};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A `PUT` of a context declaring `len` bytes; the head and the first `sent` bytes are written.
async fn start_put(url: &str, key: &str, id: &str, len: usize, sent: usize) -> TcpStream {
    let mut conn = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "PUT /api/contexts/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let body = format!(r#"{{"content":"{}"}}"#, "a".repeat(len - 14));
    conn.write_all(&body.as_bytes()[..sent]).await.unwrap();
    conn
}

async fn context_id(c: &common::Api, external_id: &str) -> String {
    assert_eq!(c.upsert(external_id, "x", &[]).await.status, StatusCode::OK);
    c.id_of(external_id).await
}

async fn one_tenant_cannot_hold_the_budget(b: Backend) {
    // A budget of 8 MiB, 4 MiB a tenant; no minimum rate, so that only the shares act here.
    let s = TestServer::start_with(
        b,
        ServerConfig::default()
            .body_budget_bytes(8 << 20)
            .body_share_bytes(4 << 20)
            .min_body_rate(0),
    )
    .await;
    let a = s.tenant(Plan::Pro, ALL).await;
    let b_tenant = s.tenant(Plan::Pro, ALL).await;
    let a_id = context_id(&a.client, "a").await;
    let b_id = context_id(&b_tenant.client, "b").await;
    // Tenant A: four 2 MiB bodies that never finish (8 MiB: the whole budget, were it not for
    // the share: two hold A's share, two wait for it).
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(start_put(&s.url, &a.client.key, &a_id, 2 << 20, 16).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Tenant B writes 2 MiB bodies meanwhile (1 MiB of newlines, escaped), at once.
    let mut latencies = Vec::new();
    for i in 0..5 {
        let started = Instant::now();
        let content = format!("{i}{}", "\n".repeat((1 << 20) - 16));
        let r = b_tenant
            .client
            .put(
                &format!("/api/contexts/{b_id}"),
                serde_json::json!({ "content": content }),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        latencies.push(started.elapsed());
    }
    latencies.sort();
    eprintln!(
        "{b:?}: tenant B's 2 MiB PUTs while tenant A holds 4 x 2 MiB bodies open: median {:?}, max {:?}",
        latencies[2], latencies[4]
    );
    assert!(
        latencies[4] < Duration::from_secs(10),
        "tenant B waited for tenant A's bodies: {latencies:?}"
    );
    drop(held);
    s.stop().await;
}

/// A tenant's share of the body budget in `a_trickled_body_is_cut_and_others_go_on`.
const SHARE: usize = 8 << 20;

async fn a_trickled_body_is_cut_and_others_go_on(b: Backend) {
    // The default rate (4 KiB/s after the first 5 s); a budget of 16 MiB, 8 MiB a tenant, so
    // that A's eight 2 MiB bodies would hold the whole budget were it not for the share.
    let s = TestServer::start_with(
        b,
        ServerConfig::default()
            .body_budget_bytes(16 << 20)
            .body_share_bytes(SHARE),
    )
    .await;
    let a = s.tenant(Plan::Pro, ALL).await;
    let b_tenant = s.tenant(Plan::Pro, ALL).await;
    let a_id = context_id(&a.client, "a").await;
    let b_id = context_id(&b_tenant.client, "b").await;
    // Tenant A trickles 8 bodies of 2 MiB, a byte every 200 ms (each byte resets the idle
    // timeout, so only the minimum rate can cut them before the request timeout).
    let started = Instant::now();
    let mut trickles = Vec::new();
    for _ in 0..8 {
        let mut conn = start_put(&s.url, &a.client.key, &a_id, 2 << 20, 1).await;
        trickles.push(tokio::spawn(async move {
            let mut answer = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                tokio::select! {
                    n = conn.read(&mut buf) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(n) => answer.extend_from_slice(&buf[..n]),
                    },
                    () = tokio::time::sleep(Duration::from_millis(200)) => {
                        if conn.write_all(b"a").await.is_err() {
                            break;
                        }
                    }
                }
                if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                    break;
                }
            }
            (
                String::from_utf8_lossy(&answer).to_string(),
                started.elapsed(),
            )
        }));
    }
    // Tenant B's writes go on meanwhile.
    let mut latencies = Vec::new();
    for i in 0..10 {
        let t = Instant::now();
        let r = b_tenant
            .client
            .put(
                &format!("/api/contexts/{b_id}"),
                serde_json::json!({ "content": format!("{i}") }),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        latencies.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let b_done = started.elapsed();
    latencies.sort();
    let mut cut_at = Vec::new();
    for t in trickles {
        let (answer, at) = t.await.unwrap();
        cut_at.push(at);
        // Every one of B's writes was answered while A's trickles all held their bodies open.
        assert!(
            b_done < at,
            "tenant B's writes ended at {b_done:?}, after a trickle was cut at {at:?}: {latencies:?}"
        );
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("request_timeout"), "{answer}");
        assert!(answer.contains("too slowly"), "{answer}");
    }
    // Cut by the minimum rate, counted from when the server starts reading a body: byte n is
    // due 5 s + n / 4 KiB/s later, so a byte every 200 ms is late just past 5 s. The four bodies
    // that fit A's share are read at once and cut then (docs/reliability.md: within 6 s); the
    // four that waited for the share are read when those are cut, and cut 5 s later. 3 s more
    // allow a busy machine; the request timeout (30 s) would cut them otherwise.
    cut_at.sort();
    let share_bodies = SHARE / (2 << 20);
    let first_wave = cut_at[share_bodies - 1];
    assert!(first_wave < Duration::from_secs(8), "{cut_at:?}");
    assert!(
        cut_at[7] < first_wave + Duration::from_secs(8),
        "{cut_at:?}"
    );
    eprintln!(
        "{b:?}: tenant B's PUTs while tenant A trickles 8 x 2 MiB bodies: median {:?}, max {:?}",
        latencies[5], latencies[9]
    );
    s.stop().await;
}

contextq_server::database_tests!(
    one_tenant_cannot_hold_the_budget,
    a_trickled_body_is_cut_and_others_go_on,
);
