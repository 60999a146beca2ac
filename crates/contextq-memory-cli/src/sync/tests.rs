//! The sync's cases one by one, and a randomized model: folders and the store edited at random
//! between syncs in random order, with syncs cut short, converge, and lose nothing that was
//! synced. On `MemoryStore` (every case) and on contextq-server (both databases: versions with
//! rows, conditional writes over HTTP).

use std::sync::Arc;

use contextq_memory_tool::MemoryStore;

use super::*;

fn opts(host: &str) -> SyncOptions {
    SyncOptions {
        prefix: MemoryPath::root(),
        prefer: Prefer::Store,
        dry_run: false,
        host: host.into(),
        include_hidden: false,
    }
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

async fn store_files(store: &dyn Store) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(l) = store.list(&MemoryPath::root()).await.unwrap() {
        for f in l.files {
            let e = store.get(&f.path).await.unwrap().unwrap();
            out.insert(
                f.path
                    .normalized()
                    .trim_start_matches("/memories/")
                    .to_string(),
                e.content,
            );
        }
    }
    out
}

async fn put(store: &dyn Store, rel: &str, text: &str) {
    let p = MemoryPath::parse(&format!("/memories/{rel}")).unwrap();
    store.put(&p, text, PutMode::Overwrite).await.unwrap();
}

fn actions(r: &Report) -> Vec<(&'static str, String)> {
    r.actions
        .iter()
        .map(|a| (a.action, a.path.clone()))
        .collect()
}

#[tokio::test]
async fn one_side_changes_go_across_and_a_second_pass_does_nothing() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "MEMORY.md", "# index\r\nno final newline");
    write(a.path(), "topics/rust.md", "prefers Rust\n");
    write(a.path(), ".git/config", "hidden");
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(
        actions(&r),
        [
            ("pushed", "MEMORY.md".into()),
            ("pushed", "topics/rust.md".into())
        ]
    );
    assert_eq!(store_files(&store).await, folder(a.path()));
    assert_eq!(
        store_files(&store).await["MEMORY.md"],
        "# index\r\nno final newline",
        "CRLF and a missing final newline kept byte for byte"
    );
    let again = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert!(again.actions.is_empty(), "{:?}", again.actions);
    assert_eq!(again.hashed, 0, "an unchanged folder is not read");
    assert_eq!(
        again.changed, None,
        "a store without a changes feed is listed"
    );
    assert_eq!(
        again.changed, None,
        "a store without a changes feed is listed"
    );

    // The store changes: pulled; deleted there: deleted here; deleted here: deleted there.
    put(&store, "topics/rust.md", "prefers Rust, 2024 edition\n").await;
    put(&store, "new.md", "from another machine\n").await;
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(
        actions(&r),
        [
            ("pulled", "new.md".into()),
            ("pulled", "topics/rust.md".into())
        ]
    );
    assert_eq!(folder(a.path()), store_files(&store).await);
    store
        .delete(&MemoryPath::parse("/memories/new.md").unwrap(), None)
        .await
        .unwrap();
    std::fs::remove_file(a.path().join("MEMORY.md")).unwrap();
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(
        actions(&r),
        [
            ("deleted in the store", "MEMORY.md".into()),
            ("deleted here", "new.md".into())
        ]
    );
    assert_eq!(folder(a.path()), store_files(&store).await);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a.path().join("topics/rust.md")), 0o600);
        assert_eq!(mode(&a.path().join(STATE_DIR)), 0o700);
        assert_eq!(mode(&a.path().join(STATE_DIR).join("baseline.json")), 0o600);
    }
}

#[tokio::test]
async fn both_sides_changed_is_a_conflict_both_kept() {
    for prefer in [Prefer::Store, Prefer::Local] {
        let store = MemoryStore::new();
        let a = tempfile::tempdir().unwrap();
        write(a.path(), "notes.md", "v1\n");
        sync(&store, a.path(), &opts("a")).await.unwrap();
        write(a.path(), "notes.md", "local edit\n");
        put(&store, "notes.md", "store edit\n").await;
        let o = SyncOptions {
            prefer,
            ..opts("laptop")
        };
        let r = sync(&store, a.path(), &o).await.unwrap();
        assert_eq!(r.conflicts(), 1, "{:?}", r.actions);
        let files = folder(a.path());
        assert_eq!(files, store_files(&store).await);
        let side = files
            .keys()
            .find(|k| k.starts_with("notes.conflict-laptop-") && k.ends_with(".md"))
            .unwrap_or_else(|| panic!("{files:?}"))
            .clone();
        let (at_path, aside) = match prefer {
            Prefer::Store => ("store edit\n", "local edit\n"),
            Prefer::Local => ("local edit\n", "store edit\n"),
        };
        assert_eq!(files["notes.md"], at_path);
        assert_eq!(files[&side], aside);
        let again = sync(&store, a.path(), &o).await.unwrap();
        assert!(again.actions.is_empty(), "{:?}", again.actions);
    }
}

#[tokio::test]
async fn a_delete_against_a_change_loses_to_the_change() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "x.md", "1\n");
    write(a.path(), "y.md", "1\n");
    sync(&store, a.path(), &opts("a")).await.unwrap();
    // x: deleted here, changed in the store; y: changed here, deleted in the store.
    std::fs::remove_file(a.path().join("x.md")).unwrap();
    put(&store, "x.md", "2\n").await;
    write(a.path(), "y.md", "2\n");
    store
        .delete(&MemoryPath::parse("/memories/y.md").unwrap(), None)
        .await
        .unwrap();
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(
        actions(&r),
        [("pulled", "x.md".into()), ("pushed", "y.md".into())]
    );
    let files = folder(a.path());
    assert_eq!(files["x.md"], "2\n");
    assert_eq!(files["y.md"], "2\n");
    assert_eq!(files, store_files(&store).await);
}

#[tokio::test]
async fn a_dry_run_changes_nothing_and_binary_files_are_skipped() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "a.md", "a\n");
    std::fs::write(a.path().join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    let o = SyncOptions {
        dry_run: true,
        ..opts("a")
    };
    let r = sync(&store, a.path(), &o).await.unwrap();
    let mut done = actions(&r);
    done.sort();
    assert_eq!(
        done,
        [("pushed", "a.md".into()), ("skipped", "blob.bin".into())]
    );
    assert!(store_files(&store).await.is_empty());
    assert!(!a.path().join(STATE_DIR).exists());
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(r.actions.len(), 2);
    assert_eq!(store_files(&store).await.len(), 1);
}

/// What the rules leave out is left alone on both sides: a hidden file only the store holds is
/// neither pulled nor, on the next pass, deleted as "gone from the folder"; the ignore file's
/// patterns keep local drafts local and a store file under an ignored name in the store;
/// `!pattern` takes in what `view` hides; taking a pattern out later syncs what it held.
#[tokio::test]
async fn the_rules_leave_both_sides_alone() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    put(&store, ".private.md", "the store's hidden file\n").await;
    put(&store, "drafts/remote.md", "a draft in the store\n").await;
    write(a.path(), "MEMORY.md", "index\n");
    write(a.path(), "drafts/local.md", "my draft\n");
    write(a.path(), "scratch.tmp", "scratch\n");
    write(a.path(), ".notes/kept.md", "taken in\n");
    write(a.path(), ".git/HEAD", "ref\n");
    write(a.path(), IGNORE_FILE, "drafts/\n*.tmp\n!.notes/\n");
    for pass in 0..3 {
        let r = sync(&store, a.path(), &opts("a")).await.unwrap();
        if pass == 0 {
            let mut done = actions(&r);
            done.sort();
            assert_eq!(
                done,
                [
                    ("pushed", ".notes/kept.md".into()),
                    ("pushed", "MEMORY.md".into())
                ]
            );
            assert_eq!(r.ignored, 2, "the store's hidden file and its draft");
        } else {
            assert!(r.actions.is_empty(), "pass {pass}: {:?}", r.actions);
        }
    }
    let stored = store_files(&store).await;
    assert_eq!(
        stored.keys().collect::<Vec<_>>(),
        [
            ".notes/kept.md",
            ".private.md",
            "MEMORY.md",
            "drafts/remote.md"
        ]
    );
    assert!(!a.path().join(".private.md").exists());
    assert!(!a.path().join("drafts/remote.md").exists());
    // The drafts pattern taken out: both drafts meet.
    write(a.path(), IGNORE_FILE, "*.tmp\n!.notes/\n");
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    let mut done = actions(&r);
    done.sort();
    assert_eq!(
        done,
        [
            ("pulled", "drafts/remote.md".into()),
            ("pushed", "drafts/local.md".into())
        ]
    );
    assert!(!store_files(&store).await.contains_key("scratch.tmp"));
    // A bad pattern stops the pass before anything is done, naming the file and the line.
    write(a.path(), IGNORE_FILE, "ok\n[z-a]\n");
    let e = format!(
        "{:#}",
        sync(&store, a.path(), &opts("a")).await.unwrap_err()
    );
    assert!(e.contains("line 2"), "{e}");
}

#[cfg(unix)]
#[tokio::test]
async fn no_link_is_followed_out_of_the_folder() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.md", "not yours\n");
    std::os::unix::fs::symlink(outside.path(), a.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), a.path().join("s.md")).unwrap();
    write(a.path(), "ok.md", "ok\n");
    sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(
        store_files(&store).await.keys().collect::<Vec<_>>(),
        ["ok.md"]
    );
}

/// A baseline that was not saved (the process killed after a write, before the record) is
/// found equal on both sides on the next pass: agreed, nothing copied twice.
#[tokio::test]
async fn a_pass_killed_before_its_record_converges() {
    let store = MemoryStore::new();
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "a.md", "a\n");
    write(a.path(), "b.md", "b\n");
    sync(&store, a.path(), &opts("a")).await.unwrap();
    write(a.path(), "a.md", "a2\n");
    put(&store, "b.md", "b2\n").await;
    let saved = std::fs::read(Baseline::path(a.path())).unwrap();
    sync(&store, a.path(), &opts("a")).await.unwrap();
    // The kill: the writes happened, their record did not.
    std::fs::write(Baseline::path(a.path()), saved).unwrap();
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(r.conflicts(), 0, "{:?}", r.actions);
    assert!(
        r.actions.iter().all(|x| x.action == "agreed"),
        "{:?}",
        r.actions
    );
    assert_eq!(folder(a.path()), store_files(&store).await);
    assert_eq!(folder(a.path()).len(), 2);
}

/// A store around the model's store that records every content ever written to it (the
/// history a store with versions keeps; `MemoryStore` has none) and fails writes on demand:
/// the `n`th write from [`Faulty::arm`] fails before it is applied (`Io`), or is applied and
/// then answers `OutcomeUnknown` (the answer lost), as a dropped connection or a kill would.
struct Faulty {
    inner: Arc<dyn Store>,
    written: std::sync::Mutex<BTreeSet<String>>,
    /// Writes until the fault (0: none armed) and whether it lands first.
    armed: std::sync::Mutex<(u32, bool)>,
}

impl Faulty {
    fn new(inner: Arc<dyn Store>) -> Faulty {
        Faulty {
            inner,
            written: Default::default(),
            armed: Default::default(),
        }
    }

    fn arm(&self, after: u32, lands: bool) {
        *self.armed.lock().unwrap() = (after, lands);
    }

    /// `Some(lands)` when this write is the armed one.
    fn fault(&self) -> Option<bool> {
        let mut a = self.armed.lock().unwrap();
        match a.0 {
            0 => None,
            1 => {
                a.0 = 0;
                Some(a.1)
            }
            _ => {
                a.0 -= 1;
                None
            }
        }
    }

    fn record(&self, text: &str) {
        self.written.lock().unwrap().insert(text.to_string());
    }

    fn io(path: &MemoryPath) -> Error {
        Error::Io {
            operation: "write (injected fault)",
            path: path.normalized(),
            source: std::io::Error::other("the connection dropped"),
        }
    }

    fn lost(path: &MemoryPath, operation: &'static str) -> Error {
        Error::OutcomeUnknown {
            path: path.normalized(),
            operation,
            cause: Box::new(Faulty::io(path)),
        }
    }
}

#[contextq_memory_tool::async_trait]
impl Store for Faulty {
    async fn get(
        &self,
        path: &MemoryPath,
    ) -> contextq_memory_tool::Result<Option<contextq_memory_tool::store::Entry>> {
        self.inner.get(path).await
    }
    async fn list(
        &self,
        dir: &MemoryPath,
    ) -> contextq_memory_tool::Result<Option<contextq_memory_tool::store::Listing>> {
        self.inner.list(dir).await
    }
    async fn changes(
        &self,
        dir: &MemoryPath,
        since: Option<&str>,
    ) -> contextq_memory_tool::Result<Option<contextq_memory_tool::store::Changes>> {
        self.inner.changes(dir, since).await
    }
    async fn put(
        &self,
        path: &MemoryPath,
        text: &str,
        mode: PutMode,
    ) -> contextq_memory_tool::Result<Option<Version>> {
        match self.fault() {
            Some(false) => Err(Faulty::io(path)),
            Some(true) => {
                let done = self.inner.put(path, text, mode).await;
                if done.is_ok() {
                    self.record(text);
                }
                done.and(Err(Faulty::lost(path, "write")))
            }
            None => {
                let done = self.inner.put(path, text, mode).await;
                if done.is_ok() {
                    self.record(text);
                }
                done
            }
        }
    }
    async fn delete(
        &self,
        path: &MemoryPath,
        expected: Option<Version>,
    ) -> contextq_memory_tool::Result<()> {
        match self.fault() {
            Some(false) => Err(Faulty::io(path)),
            Some(true) => self
                .inner
                .delete(path, expected)
                .await
                .and(Err(Faulty::lost(path, "delete"))),
            None => self.inner.delete(path, expected).await,
        }
    }
    async fn create_many(
        &self,
        files: &[(MemoryPath, String)],
    ) -> Vec<contextq_memory_tool::Result<Option<Version>>> {
        let fault = self.fault();
        if fault == Some(false) {
            return files.iter().map(|(p, _)| Err(Faulty::io(p))).collect();
        }
        let done = self.inner.create_many(files).await;
        for ((_, text), r) in files.iter().zip(&done) {
            if r.is_ok() {
                self.record(text);
            }
        }
        match fault {
            Some(true) => files
                .iter()
                .map(|(p, _)| Err(Faulty::lost(p, "write")))
                .collect(),
            _ => done,
        }
    }
    fn key(&self, path: &MemoryPath) -> String {
        self.inner.key(path)
    }
}

/// The sync's promise for one pass over one folder: a file's content the pass replaced or
/// removed was agreed before (so the store holds or held it: `written`), or is kept in the
/// folder (a conflict file).
fn nothing_lost_by(
    pass: &str,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    written: &BTreeSet<String>,
) {
    let kept: BTreeSet<&String> = after.values().collect();
    for (rel, content) in before {
        if after.get(rel) != Some(content) {
            assert!(
                written.contains(content) || kept.contains(content),
                "{pass}: {rel}'s {content:?} was replaced or removed without ever reaching the store"
            );
        }
    }
}

/// One random life of `folders` folders and `store`: creates, edits, deletes and renames on
/// every side, syncs in random order (two folders at once, interleaved, in some steps), faults
/// injected between a pass's writes (a write refused, or applied with its answer lost) and, after
/// a failed pass, sometimes the baseline as it was before the pass (a kill before any save).
/// After every pass, nothing the pass replaced or removed in a folder is gone (it was agreed, so
/// the store had it, or it is kept as a conflict file); at the end, with faults off, every
/// folder equals the store and every edit in a folder is in it or in the store's history.
/// Returns how many edits the store had never seen were checked, and how many passes failed.
async fn model(inner: Arc<dyn Store>, seed: u64, folders: usize, steps: usize) -> (usize, usize) {
    let faulty = Arc::new(Faulty::new(inner));
    let store: Arc<dyn Store> = faulty.clone();
    let mut rng = fastrand::Rng::with_seed(seed);
    let dirs: Vec<tempfile::TempDir> = (0..folders).map(|_| tempfile::tempdir().unwrap()).collect();
    let names = ["a.md", "b.md", "d/c.md", "d/e.md", "MEMORY.md"];
    let mut token = 0;
    let mut failed = 0;
    let trace = std::env::var("SYNC_MODEL_TRACE").is_ok();
    for step in 0..steps {
        let side = rng.usize(..=folders);
        let name = names[rng.usize(..names.len())];
        let op = rng.u8(..12);
        if trace {
            eprintln!("step {step}: op {op} side {side} name {name} token {token}");
        }
        match op {
            0..=5 => {
                token += 1;
                let text = format!("t{token}\n");
                if side == folders {
                    put(store.as_ref(), name, &text).await;
                } else {
                    write(dirs[side].path(), name, &text);
                }
            }
            6 | 7 => {
                if side == folders {
                    let _ = store
                        .delete(
                            &MemoryPath::parse(&format!("/memories/{name}")).unwrap(),
                            None,
                        )
                        .await;
                } else {
                    let _ = std::fs::remove_file(dirs[side].path().join(name));
                }
            }
            8 => {
                let to = names[rng.usize(..names.len())];
                if side == folders {
                    let p = |n: &str| MemoryPath::parse(&format!("/memories/{n}")).unwrap();
                    let _ = store.rename(&p(name), &p(to)).await;
                } else {
                    let (from, to) = (dirs[side].path().join(name), dirs[side].path().join(to));
                    if from.exists() && !to.exists() {
                        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                        std::fs::rename(from, to).unwrap();
                    }
                }
            }
            _ => {
                // One folder, or two at once.
                let mut picked = vec![rng.usize(..folders)];
                if folders > 1 && rng.bool() {
                    picked.push((picked[0] + 1 + rng.usize(..folders - 1)) % folders);
                }
                if rng.u8(..3) == 0 {
                    faulty.arm(1 + rng.u32(..5), rng.bool());
                }
                let prefer = if rng.bool() {
                    Prefer::Store
                } else {
                    Prefer::Local
                };
                let o: Vec<SyncOptions> = picked
                    .iter()
                    .map(|&d| SyncOptions {
                        prefer,
                        ..opts(&format!("h{d}"))
                    })
                    .collect();
                let before: Vec<_> = picked.iter().map(|&d| folder(dirs[d].path())).collect();
                let baselines: Vec<Option<Vec<u8>>> = picked
                    .iter()
                    .map(|&d| std::fs::read(Baseline::path(dirs[d].path())).ok())
                    .collect();
                let done = match picked.as_slice() {
                    [d] => vec![sync(store.as_ref(), dirs[*d].path(), &o[0]).await],
                    [d, e] => {
                        let (x, y) = tokio::join!(
                            sync(store.as_ref(), dirs[*d].path(), &o[0]),
                            sync(store.as_ref(), dirs[*e].path(), &o[1])
                        );
                        vec![x, y]
                    }
                    _ => unreachable!(),
                };
                faulty.arm(0, false);
                for (i, (&d, r)) in picked.iter().zip(done).enumerate() {
                    let written = faulty.written.lock().unwrap().clone();
                    let pass = format!("seed {seed} step {step} folder {d}");
                    nothing_lost_by(&pass, &before[i], &folder(dirs[d].path()), &written);
                    if trace {
                        match &r {
                            Ok(r) => eprintln!("  sync {d}: {:?}", actions(r)),
                            Err(e) => eprintln!("  sync {d}: failed {e:#}"),
                        }
                    }
                    if r.is_err() {
                        failed += 1;
                        // Killed before any save: the baseline as it was.
                        if rng.bool() {
                            let file = Baseline::path(dirs[d].path());
                            match &baselines[i] {
                                Some(bytes) => std::fs::write(&file, bytes).unwrap(),
                                None => {
                                    let _ = std::fs::remove_file(&file);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Every edit in a folder now must end in the final state, in a conflict file, or in the
    // store's history (`written`: what the store ever held); the edits the store never saw are
    // the ones counted.
    let unseen = |written: &BTreeSet<String>| -> BTreeSet<String> {
        dirs.iter()
            .flat_map(|d| folder(d.path()).into_values())
            .filter(|c| !written.contains(c))
            .collect()
    };
    let must_survive = unseen(&faulty.written.lock().unwrap().clone());
    // Rounds of syncs until nothing moves.
    for round in 0.. {
        let mut moved = 0;
        for (d, dir) in dirs.iter().enumerate() {
            let r = sync(store.as_ref(), dir.path(), &opts(&format!("h{d}")))
                .await
                .unwrap();
            moved += r.actions.iter().filter(|a| a.action != "agreed").count();
        }
        if moved == 0 {
            break;
        }
        assert!(round < 6, "seed {seed}: no convergence");
    }
    let expected = store_files(store.as_ref()).await;
    for dir in &dirs {
        assert_eq!(folder(dir.path()), expected, "seed {seed}");
    }
    let kept: BTreeSet<&String> = expected.values().collect();
    let written = faulty.written.lock().unwrap().clone();
    for content in &must_survive {
        assert!(
            kept.contains(content) || written.contains(content),
            "seed {seed}: {content:?} was lost"
        );
    }
    (must_survive.len(), failed)
}

#[tokio::test]
async fn the_model_converges_on_memory() {
    let (mut checked, mut failed) = (0, 0);
    for seed in std::env::var("SYNC_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(0..40, |s: u64| s..s + 1)
    {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let (c, f) = model(store, seed, 2 + (seed as usize % 2), 60).await;
        (checked, failed) = (checked + c, failed + f);
    }
    if std::env::var("SYNC_MODEL_SEED").is_err() {
        assert!(checked > 20, "only {checked} unsynced edits were checked");
        assert!(
            failed > 20,
            "only {failed} passes failed by an injected fault"
        );
    }
}

async fn the_model_converges_on_the_server(b: contextq_server::Backend) {
    use contextq_server::testing::TestServer;
    let server = TestServer::start(b).await;
    for seed in 0..6 {
        let ws = format!("w{seed}");
        let t = server
            .tenant(
                contextq_server::Plan::Unlimited,
                &[contextq_server::Scope::Read, contextq_server::Scope::Write],
                &ws,
            )
            .await;
        let store = contextq_memory_tool::ContextQMemoryToolOptions::new(&t.api_key)
            .base_url(server.url())
            .workspace(ws)
            .store()
            .unwrap();
        model(Arc::new(store), seed, 2, 40).await;
    }
}

contextq_server::database_tests!(the_model_converges_on_the_server);

/// On a ContextQ without the `audit-log` extension the store is listed on every pass, and the
/// sync holds the same: changes go across, a second pass does nothing.
async fn a_plain_contextq_is_listed(b: contextq_server::Backend) {
    use contextq_server::testing::TestServer;
    let server = TestServer::start(b).await;
    let t = server
        .tenant(
            contextq_server::Plan::Unlimited,
            &[contextq_server::Scope::Read, contextq_server::Scope::Write],
            "ws",
        )
        .await;
    let plain = contextq_memory_tool::testing::proxy::Proxy::plain(server.url()).await;
    let store = contextq_memory_tool::ContextQMemoryToolOptions::new(&t.api_key)
        .base_url(&plain.url)
        .workspace("ws")
        .store()
        .unwrap();
    let a = tempfile::tempdir().unwrap();
    write(a.path(), "x.md", "1\n");
    sync(&store, a.path(), &opts("a")).await.unwrap();
    put(&store, "x.md", "2\n").await;
    let r = sync(&store, a.path(), &opts("a")).await.unwrap();
    assert_eq!(r.changed, None);
    assert_eq!(actions(&r), [("pulled", "x.md".into())]);
    assert!(
        sync(&store, a.path(), &opts("a"))
            .await
            .unwrap()
            .actions
            .is_empty()
    );
    assert_eq!(folder(a.path()), store_files(&store).await);
}

mod plain {
    use super::*;
    contextq_server::database_tests!(a_plain_contextq_is_listed);
}
