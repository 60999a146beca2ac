//! Unauthenticated denial of service at the connection level: hundreds of connections that
//! send nothing, or a header byte now and then (slowloris), must neither lock a legitimate
//! client out nor be kept forever; past the connection cap a new connection takes the place of
//! one that is not being served, and is closed at once only when every slot serves a request.
//! Timeouts are shortened so that the test runs in seconds; the defaults are documented in
//! `contextq_server::listen`.

use std::time::Duration;

use contextq_server::testing::TestServer;
use contextq_server::{Backend, ConnectionLimits, Plan, Scope, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A key that reads and writes.
const RW: &[Scope] = &[Scope::Read, Scope::Write];

fn config(limits: ConnectionLimits) -> ServerConfig {
    ServerConfig::default().connections(limits)
}

async fn server(header_read: Duration, idle: Duration, cap: usize) -> TestServer {
    // Hundreds of client and server sockets live in this one test process.
    contextq_server::listen::raise_fd_limit();
    TestServer::start_with(
        Backend::Sqlite,
        config(
            ConnectionLimits::default()
                .header_read_timeout(header_read)
                .idle_timeout(idle)
                .max_connections(cap),
        ),
    )
    .await
}

fn addr(server: &TestServer) -> String {
    server.url().trim_start_matches("http://").to_string()
}

/// A plain request on a new connection: true when `/health` answered 200 within `within`.
async fn served(url: &str, within: Duration) -> bool {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(within)
        .build()
        .unwrap();
    matches!(client.get(format!("{url}/health")).send().await, Ok(r) if r.status() == 200)
}

/// Waits (up to `within`) until the server closes `stream`: the read sees end of file or a reset.
async fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A 408 or other bytes before the close: keep reading until the end.
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn idle_and_slowloris_connections_neither_lock_out_nor_stay() {
    let header_read = Duration::from_secs(2);
    let server = server(header_read, Duration::from_secs(30), 1000).await;
    let addr = addr(&server);
    // Every one of them must be cut by the header read timeout: by the time the last was
    // opened plus that timeout, with 3 s for a busy machine (not the 10 s this once allowed).
    let cut_by = |opened: tokio::time::Instant| opened + header_read + Duration::from_secs(3);

    // 300 connections that never send a byte.
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    // 300 slowloris connections: a request line and the start of a header, then a byte every
    // 300 ms (each byte is activity, so only the header read timeout can cut them).
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-a: ")
            .await
            .unwrap();
        slow.push(s);
    }
    let deadline = cut_by(tokio::time::Instant::now());
    let (stop_dripping, mut stopped) = tokio::sync::watch::channel(false);
    let drip = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(300)) => {}
                _ = stopped.changed() => return slow,
            }
            for s in &mut slow {
                // The server may already have closed it: that is the point.
                let _ = s.write_all(b"a").await;
            }
        }
    });

    // While all 600 are open, a legitimate client is served.
    assert!(
        served(server.url(), Duration::from_secs(5)).await,
        "a legitimate client was not served while 600 idle and slowloris connections were open"
    );

    // And every one of them is cut by the header read timeout (2 s here), the idle ones and
    // the ones still dripping bytes alike.
    let left = |deadline: tokio::time::Instant| {
        deadline.saturating_duration_since(tokio::time::Instant::now())
    };
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, left(deadline)).await,
            "idle connection {i} was still open 3 s after the header read timeout"
        );
    }
    let mut slow = {
        // Keep dripping until the server cut them all, then stop.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop_dripping.send(true).unwrap();
        drip.await.unwrap()
    };
    for (i, s) in slow.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, left(deadline)).await,
            "slowloris connection {i} was still open 3 s after the header read timeout"
        );
    }
    assert!(served(server.url(), Duration::from_secs(5)).await);
    server.stop().await;
}

/// Sends `GET /health` on `stream` and reads the answer's status line.
async fn health_on(stream: &mut TcpStream) -> Option<String> {
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    text.lines().next().map(str::to_string)
}

#[tokio::test]
async fn past_the_cap_a_new_connection_takes_the_place_of_the_oldest_idle_one() {
    let server = server(Duration::from_secs(20), Duration::from_secs(60), 50).await;
    let addr = addr(&server);
    // One kept-alive connection that has been served, then 49 that never send a byte.
    let mut pooled = TcpStream::connect(&addr).await.unwrap();
    assert_eq!(
        health_on(&mut pooled).await.as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    let mut held = Vec::new();
    for _ in 0..49 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    // Let the server accept all 50 before the 51st arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(&addr).await.unwrap();
    assert_eq!(
        health_on(&mut extra).await.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "a connection past the cap was not served"
    );
    // The oldest connection that never sent a request made room; the others, and the
    // served keep-alive connection, are still open.
    assert!(closed_by_server(&mut held[0], Duration::from_secs(1)).await);
    for (i, s) in held[1..].iter_mut().enumerate() {
        // Still open: it is served when it asks.
        assert_eq!(
            health_on(s).await.as_deref(),
            Some("HTTP/1.1 200 OK"),
            "held connection {} was closed",
            i + 1
        );
    }
    assert_eq!(
        health_on(&mut pooled).await.as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    server.stop().await;
}

#[tokio::test]
async fn a_served_idle_connection_makes_room_only_after_every_unserved_one() {
    let server = server(Duration::from_secs(20), Duration::from_secs(60), 3).await;
    let addr = addr(&server);
    let mut pooled = TcpStream::connect(&addr).await.unwrap();
    assert!(health_on(&mut pooled).await.is_some());
    let mut a = TcpStream::connect(&addr).await.unwrap();
    let mut b = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Two newcomers: each takes the place of an unserved connection, oldest first.
    let mut c = TcpStream::connect(&addr).await.unwrap();
    assert!(health_on(&mut c).await.is_some());
    assert!(closed_by_server(&mut a, Duration::from_secs(1)).await);
    let mut d = TcpStream::connect(&addr).await.unwrap();
    assert!(health_on(&mut d).await.is_some());
    assert!(closed_by_server(&mut b, Duration::from_secs(1)).await);
    // Now every connection has been served: the one idle the longest makes room.
    let mut e = TcpStream::connect(&addr).await.unwrap();
    assert!(health_on(&mut e).await.is_some());
    assert!(closed_by_server(&mut pooled, Duration::from_secs(1)).await);
    assert_eq!(
        health_on(&mut c).await.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "c, served more recently, was closed"
    );
    server.stop().await;
}

#[tokio::test]
async fn when_every_slot_serves_a_request_a_new_connection_is_closed_at_once() {
    let server = server(Duration::from_secs(20), Duration::from_secs(60), 20).await;
    let tenant = server.tenant(Plan::Free, RW, "ws").await;
    let addr = addr(&server);
    // 20 requests being served: complete heads, bodies still coming.
    let mut uploading = Vec::new();
    for i in 0..20 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "PUT /api/contexts/x{i} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"con",
            tenant.api_key
        );
        s.write_all(head.as_bytes()).await.unwrap();
        uploading.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut extra = TcpStream::connect(&addr).await.unwrap();
    assert!(
        closed_by_server(&mut extra, Duration::from_secs(2)).await,
        "a connection past a cap of requests being served was kept"
    );
    // None of the requests in flight was cut to make room: each body, completed, is answered
    // (95 bytes that are not JSON: 400).
    for (i, s) in uploading.iter_mut().enumerate() {
        s.write_all(&[b'x'; 95]).await.unwrap();
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("request {i} got no answer"))
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "request {i} was cut: {answer:?}"
        );
    }
    drop(uploading);
    // Their slots come back.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !served(server.url(), Duration::from_secs(1)).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "slots not given back"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_request_whose_body_stalls_is_cut_by_the_idle_timeout() {
    // Request timeout 30 s (the default): only the idle timeout (1 s) can close this early.
    let server = server(Duration::from_secs(5), Duration::from_secs(1), 100).await;
    // A valid writer, so that the server goes on to read the body.
    let tenant = server.tenant(Plan::Free, RW, "ws").await;
    let mut s = TcpStream::connect(addr(&server)).await.unwrap();
    let head = format!(
        "PUT /api/contexts/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"con",
        tenant.api_key
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    assert!(closed_by_server(&mut s, Duration::from_secs(15)).await);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "closed only by the request timeout"
    );
    server.stop().await;
}

#[tokio::test]
async fn keep_alive_connections_serve_several_requests() {
    let server = server(Duration::from_secs(5), Duration::from_secs(5), 100).await;
    let client = reqwest::Client::new();
    for _ in 0..20 {
        let r = client
            .get(format!("{}/health", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    server.stop().await;
}
