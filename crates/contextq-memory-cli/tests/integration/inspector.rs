//! The memory inspector in a real browser: headless Chromium driven over WebDriver
//! (chromedriver, fantoccini) against `contextq-memory serve` on the embedded default. Signs in
//! with the one-time link `serve` prints, opens a file and reads its lines, opens its history,
//! sees a diff, restores, sees the restored content; and stores files whose names and contents
//! are XSS payloads and proves no script of theirs runs. Screenshots go to
//! `target/tmp/inspector-*.png`.
//!
//! Needs `chromium` and `chromium-driver` (Debian's packages; `.ci/run` installs them). Without a
//! chromedriver the test says so and passes, unless `CONTEXTQ_BROWSER_TESTS=required` (CI), when
//! it fails.

use crate::common;
use common::{BIN, Killed, embedded, run_with_input};

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

fn chromedriver() -> Option<String> {
    let candidates = [
        std::env::var("CHROMEDRIVER").ok(),
        Some("/usr/bin/chromedriver".into()),
        Some("/usr/lib/chromium/chromedriver".into()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| std::path::Path::new(p).exists())
}

fn exec(data: &std::path::Path, inputs: &[Value]) {
    let text: String = inputs.iter().map(|i| format!("{i}\n")).collect();
    let out = run_with_input(embedded(data).arg("exec"), text.as_bytes());
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["is_error"], false, "{r}");
    }
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let path =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("inspector-{name}.png"));
    std::fs::write(&path, png).unwrap();
}

async fn click(c: &Client, locator: Locator<'_>) {
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(locator)
        .await
        .unwrap_or_else(|e| panic!("{locator:?}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Waits until `css`'s text contains `needle`.
async fn until_text(c: &Client, css: &str, needle: &str) -> String {
    until(c, css, needle, |t| t.contains(needle)).await
}

/// The text of `css` once `ready` holds for it (`what` names the wait in the failure).
async fn until(c: &Client, css: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        if let Ok(e) = c.find(Locator::Css(css)).await
            && let Ok(t) = e.text().await
            && ready(&t)
        {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shot(c, "failed").await;
    let status = match c.find(Locator::Id("status")).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let logs = c
        .execute(
            "return document.body ? document.body.innerText : '';",
            vec![],
        )
        .await
        .ok();
    panic!("{css} never showed {what:?}; status {status:?}; page {logs:?}");
}

async fn no_script_ran(c: &Client) {
    let ran = c
        .execute("return [window.__xss === undefined, document.querySelectorAll('#view img, #view script, #view svg').length];", vec![])
        .await
        .unwrap();
    assert_eq!(
        ran,
        json!([true, 0]),
        "a payload's script ran or its markup was parsed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_in_a_real_browser() {
    let Some(driver) = chromedriver() else {
        contextq_server::testing::skip_unless_required(
            "CONTEXTQ_BROWSER_TESTS",
            "no chromedriver (apt-get install chromium chromium-driver)",
        );
        return;
    };
    let data = tempfile::tempdir().unwrap();
    exec(
        data.path(),
        &[
            json!({"command": "create", "path": "/memories/user.md", "file_text": "Name: Ada\nTimezone: Europe/London\n"}),
            json!({"command": "str_replace", "path": "/memories/user.md", "old_str": "Europe/London", "new_str": "America/New_York"}),
            json!({"command": "create", "path": "/memories/<img src=x onerror=window.__xss=1>.md", "file_text": "<script>window.__xss=2</script>\n<img src=x onerror=\"window.__xss=3\">\n"}),
            json!({"command": "create", "path": "/memories/x\"><svg onload=window.__xss=4>/y.md", "file_text": "</pre><script>window.__xss=5</script>\n"}),
        ],
    );
    // A large tree: 20,000 files in 100 folders, imported.
    let src = tempfile::tempdir().unwrap();
    for i in 0..20_000 {
        let dir = src.path().join(format!("memories/big/d{:02}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i:05}.md")), format!("file {i}\n")).unwrap();
    }
    let out = embedded(data.path())
        .args(["import", src.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The server, and its one-time sign-in link (stderr).
    let mut serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env_remove("CONTEXT_API_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = serve.stderr.take().unwrap();
    let serve = Killed(serve);
    // Read stderr to its end in the background (a closed pipe would end the server).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("inspector: open ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let link = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("serve prints the link");
    assert!(link.contains("/ui/#token="), "{link}");
    let _ = &serve;

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let _driver = Killed(
        Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            "--window-size=1280,900",
            format!("--user-data-dir={}", profile.path().display()),
        ]}),
    );
    let mut client = None;
    for _ in 0..50 {
        match ClientBuilder::rustls()
            .unwrap()
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let c = client.expect("chromedriver answers");

    // Sign in with the link: the key never appears in the URL, and the link works once.
    c.goto(&link).await.unwrap();
    until_text(&c, "#view h2", "Workspaces").await;
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains("token"), "{url}");
    shot(&c, "1-workspaces").await;
    click(&c, Locator::XPath("//button[text()='default']")).await;
    until_text(&c, "#tree", "user.md").await;
    no_script_ran(&c).await;
    shot(&c, "2-tree").await;

    // The large tree loads one level at a time: the top level shows the folder with its count
    // and size; expanding it shows its 100 folders, one of those its 200 files.
    let summary = until_text(&c, "#tree-summary", "files").await;
    assert!(summary.starts_with("20003 files"), "{summary}");
    let rows = |c: &Client| {
        let c = c.clone();
        async move {
            c.find_all(Locator::Css("#tree tbody tr"))
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(rows(&c).await, 4, "big/, user.md, the two hostile names");
    until_text(&c, "#tree", "20000").await;
    click(&c, Locator::Css("button.folder[data-dir='big/']")).await;
    until_text(&c, "#tree", "d99/").await;
    assert_eq!(rows(&c).await, 104);
    click(&c, Locator::Css("button.folder[data-dir='big/d07/']")).await;
    until_text(&c, "#tree", "f19907.md").await;
    assert_eq!(rows(&c).await, 304);
    shot(&c, "2b-large-tree").await;
    // Collapsing removes everything beneath.
    click(&c, Locator::Css("button.folder[data-dir='big/']")).await;
    until(&c, "#tree", "the collapsed tree", |t| !t.contains("d99/")).await;
    assert_eq!(rows(&c).await, 4);
    // The path filter finds files without opening folders, a page of 100 at a time.
    let find = c.find(Locator::Id("tree-filter-path")).await.unwrap();
    find.send_keys("big/d42/").await.unwrap();
    click(&c, Locator::Css("#tree-filter button")).await;
    until_text(&c, "#search", "/memories/big/d42/f00042.md").await;
    assert_eq!(
        c.find_all(Locator::Css("#search tbody tr"))
            .await
            .unwrap()
            .len(),
        100
    );
    click(&c, Locator::Id("search-more")).await;
    until_text(&c, "#search", "/memories/big/d42/f19942.md").await;
    click(&c, Locator::XPath("//button[text()='Back to the tree']")).await;

    // Content search: hits with their lines, the matched words marked; a line opens the file
    // there, highlighted.
    until_text(&c, "#tree", "user.md").await;
    let words = c.find(Locator::Id("content-search-query")).await.unwrap();
    words.send_keys("New_York timezone").await.unwrap();
    click(&c, Locator::Css("#content-search button")).await;
    let hits = until_text(&c, "#content-hits", "/memories/user.md").await;
    assert!(!hits.contains("f00042"), "{hits}");
    let marks = c
        .find_all(Locator::Css("#content-hits mark"))
        .await
        .unwrap();
    let mut marked = Vec::new();
    for m in marks {
        marked.push(m.text().await.unwrap());
    }
    assert!(marked.iter().any(|m| m == "New_York"), "{marked:?}");
    assert!(marked.iter().any(|m| m == "Timezone"), "{marked:?}");
    no_script_ran(&c).await;
    shot(&c, "2c-content-search").await;
    click(&c, Locator::Css("#content-hits button.snippet")).await;
    let line = until_text(&c, "#content span.at", "America/New_York").await;
    assert!(line.contains("Timezone"), "{line}");
    click(&c, Locator::XPath("//button[text()='Back to the tree']")).await;

    // A file as Claude sees it, with line numbers.
    click(&c, Locator::XPath("//button[text()='user.md']")).await;
    let content = until_text(&c, "#content", "America/New_York").await;
    assert!(
        content.contains("1\tName: Ada") || content.contains("1 Name: Ada"),
        "{content:?}"
    );
    shot(&c, "3-file").await;

    // Its history and a diff of the two versions.
    click(&c, Locator::Id("open-history")).await;
    until_text(&c, "#versions", "create").await;
    click(&c, Locator::Id("show-diff")).await;
    let diff = until_text(&c, "#diff", "America/New_York").await;
    assert!(diff.contains("- Timezone: Europe/London"), "{diff}");
    assert!(diff.contains("+ Timezone: America/New_York"), "{diff}");
    shot(&c, "4-history-diff").await;

    // Restore asks first: cancelled, nothing changes; confirmed, version 1 comes back
    // (conditional), marked in the history as a restore of it.
    click(&c, Locator::Css("button.restore[data-version='1']")).await;
    until_text(&c, "#confirm", "Restore /memories/user.md to version 1?").await;
    click(&c, Locator::Id("confirm-no")).await;
    until_text(&c, "#status", "Nothing was changed").await;
    let versions = until_text(&c, "#versions", "create").await;
    assert!(!versions.contains("restore of"), "{versions}");
    click(&c, Locator::Css("button.restore[data-version='1']")).await;
    until_text(&c, "#confirm", "Restore /memories/user.md to version 1?").await;
    click(&c, Locator::Id("confirm-yes")).await;
    until_text(&c, "#status", "Restored /memories/user.md to version 1").await;
    let content = until_text(&c, "#content", "Europe/London").await;
    assert!(!content.contains("America/New_York"), "{content}");
    shot(&c, "5-restored").await;

    // Version 2 redacted (by the CLI, beside the running serve): history says so, offers no
    // restore of it, and a diff with it is refused.
    let out = embedded(data.path())
        .args(["redact", "/memories/user.md", "--version", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    click(&c, Locator::Id("open-history")).await;
    let versions = until_text(&c, "#versions", "redacted").await;
    assert!(versions.contains("restore of 1"), "{versions}");
    assert!(!versions.contains("America/New_York"), "{versions}");
    assert!(
        c.find_all(Locator::Css("button.restore[data-version='2']"))
            .await
            .unwrap()
            .is_empty()
    );
    c.find(Locator::Css("input[name=a][value='2']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    click(&c, Locator::Id("show-diff")).await;
    until_text(&c, "#status", "was redacted").await;
    shot(&c, "5b-redacted").await;
    click(&c, Locator::XPath("//button[text()='Back to the file']")).await;

    // Hostile names and contents are shown as text; none of their scripts runs.
    click(&c, Locator::Id("nav-workspaces")).await;
    click(&c, Locator::XPath("//button[text()='default']")).await;
    let tree = until_text(&c, "#tree", "onerror").await;
    assert!(
        tree.contains("<img src=x onerror=window.__xss=1>.md"),
        "{tree}"
    );
    click(
        &c,
        Locator::XPath("//button[contains(text(), '<img src=x')]"),
    )
    .await;
    let content = until_text(&c, "#content", "<script>").await;
    assert!(
        content.contains("<script>window.__xss=2</script>"),
        "{content}"
    );
    no_script_ran(&c).await;
    click(&c, Locator::Id("open-history")).await;
    until_text(&c, "#versions", "create").await;
    no_script_ran(&c).await;
    click(&c, Locator::Id("nav-workspaces")).await;
    click(&c, Locator::XPath("//button[text()='default']")).await;
    click(
        &c,
        Locator::XPath("//button[contains(text(), 'svg onload')]"),
    )
    .await;
    click(&c, Locator::XPath("//button[text()='y.md']")).await;
    until_text(&c, "#content", "</pre>").await;
    no_script_ran(&c).await;
    shot(&c, "6-hostile").await;

    // The audit trail, filtered by path.
    click(&c, Locator::Id("nav-audit")).await;
    until_text(&c, "#audit", "context.restore (of version 1)").await;
    let path = c.find(Locator::Id("audit-path")).await.unwrap();
    // Typed as people name it: /memories/<workspace>/... (the store's external id is its own).
    path.send_keys("/memories/default/user.md").await.unwrap();
    click(&c, Locator::Css("#audit-filter button")).await;
    // The unfiltered list has creates too: wait for the filter's answer, not the first create.
    let audit = until(&c, "#audit", "the filtered trail", |t| {
        t.contains("context.create") && !t.contains("svg onload")
    })
    .await;
    assert!(!audit.contains("onerror"), "filtered to one path: {audit}");
    assert!(
        audit.contains("/memories/default/user.md") && !audit.contains("mem-tool:"),
        "paths as people name them: {audit}"
    );
    let page = c
        .find(Locator::Id("view"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("null") && !page.contains("undefined"),
        "{page}"
    );
    no_script_ran(&c).await;
    shot(&c, "7-audit").await;

    // The link signed this tab in with a session key of its own, never the embedded key; Sign
    // out revokes that session on the server.
    let embedded: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let session = c
        .execute(
            "return sessionStorage.getItem('contextq-inspector-key');",
            vec![],
        )
        .await
        .unwrap();
    let session = session.as_str().unwrap().to_string();
    assert_ne!(session, embedded["apiKey"].as_str().unwrap());
    let base = link.split("/ui/").next().unwrap().to_string();
    let status = |key: String| {
        let url = format!("{base}/api/workspaces");
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(session.clone()).await, 200);
    click(&c, Locator::Id("sign-out")).await;
    until_text(&c, "#status", "Signed out").await;
    let mut revoked = false;
    for _ in 0..50 {
        if status(session.clone()).await == 401 {
            revoked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(revoked, "Sign out did not revoke the session key");

    // The link was used: opening it again does not sign in.
    c.execute("sessionStorage.clear();", vec![]).await.unwrap();
    c.goto("about:blank").await.unwrap();
    c.goto(&link).await.unwrap();
    until_text(&c, "#status", "already used").await;

    // Signing in with an API key typed into the form (how a person uses a multi-tenant
    // server); a wrong key is refused.
    let key = embedded["apiKey"].as_str().unwrap();
    let field = c.find(Locator::Id("api-key")).await.unwrap();
    field
        .send_keys("sk_live_0000000000000000000000000000000000000000")
        .await
        .unwrap();
    click(&c, Locator::Css("#sign-in button")).await;
    until_text(&c, "#status", "refused").await;
    let field = c.find(Locator::Id("api-key")).await.unwrap();
    field.send_keys(key).await.unwrap();
    click(&c, Locator::Css("#sign-in button")).await;
    until_text(&c, "#view h2", "Workspaces").await;
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(&key[8..]), "{url}");
    c.close().await.unwrap();
}
