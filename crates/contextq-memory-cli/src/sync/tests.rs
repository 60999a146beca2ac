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

/// Two or three folders and the store, random edits on every side between syncs in random
/// order: after the last round of syncs every folder equals the store, and every content that a
/// sync saw is in the final state, in a conflict file, or was replaced or deleted later on
/// purpose (the model tracks which).
/// Returns how many unsynced edits had to survive (so that the property is not vacuous).
async fn model(store: Arc<dyn Store>, seed: u64, folders: usize, steps: usize) -> usize {
    let mut rng = fastrand::Rng::with_seed(seed);
    let dirs: Vec<tempfile::TempDir> = (0..folders).map(|_| tempfile::tempdir().unwrap()).collect();
    let names = ["a.md", "b.md", "d/c.md", "d/e.md", "MEMORY.md"];
    let mut token = 0;
    for _ in 0..steps {
        let side = rng.usize(..=folders);
        let name = names[rng.usize(..names.len())];
        match rng.u8(..10) {
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
            _ => {
                let d = rng.usize(..folders);
                let o = SyncOptions {
                    prefer: if rng.bool() {
                        Prefer::Store
                    } else {
                        Prefer::Local
                    },
                    ..opts(&format!("h{d}"))
                };
                sync(store.as_ref(), dirs[d].path(), &o).await.unwrap();
            }
        }
    }
    // Each folder's edits not yet synced (content other than its baseline's) at a path that
    // every side holds (deleted nowhere) must survive the syncs, at the path or in a conflict
    // file: a sync never overwrites what it has not agreed.
    let mut sides = vec![store_files(store.as_ref()).await];
    sides.extend(dirs.iter().map(|d| folder(d.path())));
    let mut must_survive = BTreeSet::new();
    for (d, dir) in dirs.iter().enumerate() {
        let base = Baseline::load(dir.path(), &MemoryPath::root()).unwrap();
        for (path, content) in &sides[d + 1] {
            let synced = base
                .files
                .get(path)
                .is_some_and(|a| a.sha256 == sha256_hex(content.as_bytes()));
            if !synced && sides.iter().all(|s| s.contains_key(path)) {
                must_survive.insert(content.clone());
            }
        }
    }
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
    for content in &must_survive {
        assert!(kept.contains(content), "seed {seed}: {content:?} was lost");
    }
    must_survive.len()
}

#[tokio::test]
async fn the_model_converges_on_memory() {
    let mut checked = 0;
    for seed in 0..40 {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        checked += model(store, seed, 2 + (seed as usize % 2), 60).await;
    }
    assert!(checked > 20, "only {checked} unsynced edits were checked");
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
