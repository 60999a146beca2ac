//! `contextq-bench search`: what a search costs as the tenant grows (extension `search`), and
//! what the index costs a write. A tenant is filled with generated prose (a vocabulary of 5,000
//! words drawn log-uniformly, so a few are in most files and most in few, as in real notes) and
//! one ticket id and version per file; then each kind of query is timed over HTTP, `limit=10`,
//! at each size. The write's cost with the index is `tenant-size` or `commands` run against
//! this server and against the release before it (`CONTEXTQ_BENCH_SERVER_BIN`,
//! docs/benchmarks.md).

use std::io::Write as _;
use std::time::Instant;

use anyhow::Result;
use serde_json::{Value, json};

use crate::harness::{backends, ms, serve, stats};

/// A word of the vocabulary: two to four syllables, a distinct word per index.
fn word(n: usize) -> String {
    const C: &[&str] = &[
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    ];
    const V: &[&str] = &["a", "e", "i", "o", "u"];
    let mut out = String::new();
    let mut n = n + 70;
    while n > 0 {
        out.push_str(C[n % C.len()]);
        n /= C.len();
        out.push_str(V[n % V.len()]);
        n /= V.len();
    }
    out
}

const VOCABULARY: usize = 5_000;

/// A log-uniform index into the vocabulary: word k is drawn about 1/k as often as word 1.
fn draw(rng: &mut fastrand::Rng) -> usize {
    ((VOCABULARY as f64).powf(rng.f64()) as usize).saturating_sub(1)
}

/// File `i`'s words (its text is these, a ticket id and a version).
fn words_of(i: usize) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(i as u64);
    (0..40).map(|_| word(draw(&mut rng))).collect()
}

fn text_of(i: usize) -> String {
    let words = words_of(i);
    format!(
        "# Note {i}\n{}\nTicket TICKET-{i} shipped in v1.{}.{}.\n{}\n",
        words[..20].join(" "),
        i % 50,
        i % 7,
        words[20..].join(" ")
    )
}

/// About `bytes` bytes of generated notes (whole notes, then cut at a line).
pub fn prose(bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&text_of(i));
        i += 1;
    }
    let mut end = bytes.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

/// Fills the tenant of `key` with files `range` (100 a request).
async fn load(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    range: std::ops::Range<usize>,
) -> Result<()> {
    let all: Vec<usize> = range.collect();
    for chunk in all.chunks(100) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"externalId": format!("mem-tool:ws/notes/d{:03}/n{i:06}.md", i % 500), "workspace": "ws", "type": "reference", "content": text_of(*i), "tags": ["mem-tool"]}))
            .collect();
        let r = http
            .post(format!("{url}/api/contexts/bulk-upsert"))
            .bearer_auth(key)
            .json(&json!({"contexts": items}))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "bulk-upsert: {}", r.status());
    }
    Ok(())
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The kinds of query, each made from a random file index and word draw.
type Make = fn(&mut fastrand::Rng, usize) -> String;
const KINDS: [(&str, Make); 8] = [
    ("an identifier (1 hit)", |rng, n| {
        format!("TICKET-{}", rng.usize(0..n))
    }),
    ("two words", |rng, _| {
        format!("{} {}", word(rng.usize(20..200)), word(rng.usize(20..200)))
    }),
    ("a common word", |rng, _| word(rng.usize(0..5))),
    ("a prefix*", |rng, _| {
        let w = word(rng.usize(50..500));
        format!("{}*", &w[..3.min(w.len())])
    }),
    ("a phrase", |rng, n| {
        let words = words_of(rng.usize(0..n));
        let k = rng.usize(0..19);
        format!("\"{} {}\"", words[k], words[k + 1])
    }),
    // What an attacker sends: a two-letter prefix of the commonest words, and a phrase of 16
    // of them (in no file in that order).
    ("a 2-letter prefix*", |rng, _| {
        format!("{}*", &word(rng.usize(0..5))[..2])
    }),
    ("16 common words as a phrase", |rng, _| {
        let w: Vec<String> = (0..16).map(|_| word(rng.usize(0..5))).collect();
        format!("\"{}\"", w.join(" "))
    }),
    ("16 two-letter prefixes*", |rng, _| {
        let w: Vec<String> = (0..16)
            .map(|_| format!("{}*", &word(rng.usize(0..50))[..2]))
            .collect();
        w.join(" ")
    }),
];

/// The kinds that must find something (the attackers' need not).
const FINDING: usize = 5;

/// Runs the benchmark: for each size, each kind of query `queries` times.
pub async fn run(sizes: Vec<usize>, queries: usize, postgres: Option<String>) -> Result<()> {
    let http = reqwest::Client::new();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        println!(
            "\n{backend}: search p50 / p99 ms over {queries} queries of each kind, limit=10, by files the tenant holds\n"
        );
        let head: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
        println!("| files | load s/1k files | {} |", head.join(" | "));
        println!("|---|---|{}", "---|".repeat(KINDS.len()));
        let mut loaded = 0;
        for &n in &sizes {
            let started = Instant::now();
            load(&http, &server.url, &server.key, loaded..n).await?;
            let load_per_k =
                started.elapsed().as_secs_f64() / ((n - loaded).max(1) as f64 / 1000.0);
            loaded = n;
            let mut cells = Vec::new();
            for (k, (kind, make)) in KINDS.into_iter().enumerate() {
                let mut rng = fastrand::Rng::with_seed(7);
                let mut lat = Vec::with_capacity(queries);
                let (mut hits, mut refused) = (0, 0);
                let wall = Instant::now();
                for _ in 0..queries {
                    let q = make(&mut rng, n);
                    let s = Instant::now();
                    let r = http
                        .get(format!(
                            "{}/api/contexts/search?limit=10&q={}",
                            server.url,
                            encode(&q)
                        ))
                        .bearer_auth(&server.key)
                        .send()
                        .await?;
                    // A search stopped at its budget is a 400 (counted, timed like any answer).
                    if r.status() == reqwest::StatusCode::BAD_REQUEST {
                        refused += 1;
                    } else {
                        anyhow::ensure!(r.status().is_success(), "{kind} {q}: {}", r.status());
                    }
                    let body: Value = r.json().await?;
                    lat.push(s.elapsed());
                    hits += body["hits"].as_array().map_or(0, Vec::len);
                }
                anyhow::ensure!(hits > 0 || k >= FINDING, "{kind}: no query found anything");
                let s = stats(lat, wall.elapsed());
                let refused = if refused > 0 {
                    format!(" ({refused} refused)")
                } else {
                    String::new()
                };
                cells.push(format!("{} / {}{refused}", ms(s.p50), ms(s.p99)));
            }
            println!("| {n} | {load_per_k:.2} | {} |", cells.join(" | "));
            std::io::stdout().flush()?;
        }
    }
    Ok(())
}

/// What one tenant's flood of heavy searches does to another tenant: the other's plain `GET`
/// of a small file, p50 / p99 and any answer but 200, at rest and while the flood runs; the
/// flood's answers by status; the server's peak RSS. Then the same with snippets of large
/// files (101 files of about 1 MB of Chinese text, `q=東京&limit=50`, 4 at once).
pub async fn flood(files: usize, concurrency: usize, postgres: Option<String>) -> Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let http = reqwest::Client::new();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        let pool = contextq_server::Db::connect(
            &server.database.url,
            &contextq_server::DbOptions::default(),
        )
        .await?;
        let other = contextq_server::admin::bootstrap(
            &pool,
            "other",
            contextq_server::Plan::Unlimited,
            "ws",
            &[contextq_server::Scope::Read, contextq_server::Scope::Write],
        )
        .await?
        .key
        .api_key;
        pool.close().await;
        load(&http, &server.url, &server.key, 0..files).await?;
        load(&http, &server.url, &other, 0..1).await?;
        let get = format!(
            "{}/api/contexts/by-external/{}",
            server.url,
            encode("mem-tool:ws/notes/d000/n000000.md")
        );
        // The other tenant's reads, one at a time: latencies and answers that were not 200.
        let reads = |n: usize| {
            let (http, get, key) = (http.clone(), get.clone(), other.clone());
            async move {
                let mut lat = Vec::with_capacity(n);
                let mut failed = 0;
                let wall = Instant::now();
                for _ in 0..n {
                    let s = Instant::now();
                    let r = http.get(&get).bearer_auth(&key).send().await?;
                    failed += usize::from(r.status() != reqwest::StatusCode::OK);
                    let _ = r.bytes().await?;
                    lat.push(s.elapsed());
                }
                anyhow::Ok((stats(lat, wall.elapsed()), failed))
            }
        };
        // `concurrency` loops of one tenant's searches until told to stop: answers by status.
        let storm = |queries: Vec<String>, concurrency: usize| {
            let stop = Arc::new(AtomicBool::new(false));
            let tasks: Vec<_> = (0..concurrency)
                .map(|k| {
                    let (http, url, key, stop) = (
                        http.clone(),
                        server.url.clone(),
                        server.key.clone(),
                        stop.clone(),
                    );
                    let queries = queries.clone();
                    tokio::spawn(async move {
                        let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
                        let mut i = k;
                        while !stop.load(Ordering::Relaxed) {
                            let q = &queries[i % queries.len()];
                            i += 1;
                            let r = http
                                .get(format!("{url}/api/contexts/search?{q}"))
                                .bearer_auth(&key)
                                .send()
                                .await;
                            let status = match r {
                                Ok(r) => {
                                    let status = r.status().as_u16();
                                    let _ = r.bytes().await;
                                    status
                                }
                                Err(_) => 0,
                            };
                            *by_status.entry(status).or_default() += 1;
                        }
                        by_status
                    })
                })
                .collect();
            (stop, tasks)
        };
        let end = |stop: Arc<AtomicBool>, tasks: Vec<tokio::task::JoinHandle<_>>| async move {
            stop.store(true, Ordering::Relaxed);
            let mut all = std::collections::BTreeMap::<u16, usize>::new();
            for t in tasks {
                let by: std::collections::BTreeMap<u16, usize> = t.await?;
                for (s, n) in by {
                    *all.entry(s).or_default() += n;
                }
            }
            anyhow::Ok(
                all.iter()
                    .map(|(s, n)| format!("{s}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        };
        let mut rng = fastrand::Rng::with_seed(11);
        let heavy: Vec<String> = (0..64)
            .map(|i| match i % 4 {
                0 => format!("limit=100&q={}", encode(&word(rng.usize(0..5)))),
                1 => format!("limit=100&q={}", encode(&(KINDS[5].1)(&mut rng, files))),
                2 => format!("limit=100&q={}", encode(&(KINDS[6].1)(&mut rng, files))),
                _ => format!("limit=100&q={}", encode(&(KINDS[7].1)(&mut rng, files))),
            })
            .collect();
        println!(
            "\n{backend}: another tenant's GET of a 16-byte file (300 in a row) while one tenant of {files} files searches, {concurrency} at once\n"
        );
        println!(
            "| while | GET p50 / p99 ms | GETs not 200 | the searching tenant's answers | server peak RSS MiB |"
        );
        println!("|---|---|---|---|---|");
        let (rest, failed) = reads(300).await?;
        println!(
            "| nothing else | {} / {} | {failed} | - | {:.0} |",
            ms(rest.p50),
            ms(rest.p99),
            server.peak_mib().unwrap_or(0.0)
        );
        // The other tenant's reads while `concurrency` loops of `queries` run: one row.
        let under = async |label: &str, queries: Vec<String>, concurrency: usize| -> Result<()> {
            let (stop, tasks) = storm(queries, concurrency);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let (busy, failed) = reads(300).await?;
            let answers = end(stop, tasks).await?;
            println!(
                "| {label} | {} / {} | {failed} | {answers} | {:.0} |",
                ms(busy.p50),
                ms(busy.p99),
                server.peak_mib().unwrap_or(0.0)
            );
            Ok(())
        };
        under(
            "heavy searches (common word, 2-letter prefix, 16-word phrase, 16 prefixes; limit=100)",
            heavy,
            concurrency,
        )
        .await?;
        // Large files whose snippets must be read.
        let text: String = {
            let chars: Vec<char> = "会議東京大阪記録予定資料確認".chars().collect();
            let mut out = String::with_capacity(1_000_000);
            let mut i = 0;
            while out.len() < 990_000 {
                out.push(chars[i % chars.len()]);
                i += 1;
                if i % 80 == 0 {
                    out.push('\n');
                }
            }
            out
        };
        for i in 0..101 {
            let r = http
                .post(format!("{}/api/contexts/bulk-upsert", server.url))
                .bearer_auth(&server.key)
                .json(&json!({"contexts": [{"externalId": format!("mem-tool:ws/big/b{i:03}.md"), "workspace": "ws", "type": "reference", "content": text, "tags": ["mem-tool"]}]}))
                .send()
                .await?;
            anyhow::ensure!(r.status().is_success(), "large file: {}", r.status());
        }
        under(
            "snippets of large files (`q=東京&limit=50`, 4 at once)",
            vec![format!("limit=50&q={}", encode("東京"))],
            4,
        )
        .await?;
        std::io::stdout().flush()?;
    }
    Ok(())
}

/// Full-text search (extension `search`): p50/p99 of each kind of query (an identifier, two
/// words, a common word, a prefix, a phrase) as the tenant grows.
#[derive(clap::Args)]
pub(crate) struct Search {
    /// Files the tenant holds, in turn.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 20_000, 100_000])]
    files: Vec<usize>,
    /// Queries of each kind at each size.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl Search {
    pub(crate) async fn run(self) -> Result<()> {
        let Search {
            files,
            queries,
            postgres_url,
        } = self;
        run(files, queries, postgres_url).await
    }
}

/// One tenant's flood of heavy searches against another tenant's reads (docs/search.md,
/// "Fair under load"): latencies, answers by status, the server's peak RSS.
#[derive(clap::Args)]
pub(crate) struct SearchFlood {
    /// Files the searching tenant holds.
    #[arg(long, default_value_t = 100_000)]
    files: usize,
    /// Its searches at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl SearchFlood {
    pub(crate) async fn run(self) -> Result<()> {
        let SearchFlood {
            files,
            concurrency,
            postgres_url,
        } = self;
        flood(files, concurrency, postgres_url).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextq_api::search::{Query, index_terms};

    #[test]
    fn words_are_distinct_and_each_file_holds_its_ticket() {
        let words: std::collections::HashSet<String> = (0..VOCABULARY).map(word).collect();
        assert_eq!(words.len(), VOCABULARY);
        let q = Query::parse("TICKET-42").unwrap();
        assert!(q.matches(&[], &index_terms(&text_of(42), 16_000)));
        assert!(!q.matches(&[], &index_terms(&text_of(43), 16_000)));
    }
}
