//! The shared conformance suite on the two local stores, and LocalStore's real directory sizes.

use contextq_memory_tool::conformance::{self, Profile};
use contextq_memory_tool::render::human_size;
use contextq_memory_tool::store::FileIo;
use contextq_memory_tool::{Durability, LocalStore, MemoryStore, MemoryTool, MemoryToolHandlers};
use serde_json::json;

#[tokio::test]
async fn memory_store_conforms() {
    conformance::run_all(|| async { MemoryStore::new() }, Profile::DERIVED).await;
}

#[tokio::test]
async fn local_store_conforms() {
    let dirs: std::sync::Mutex<Vec<tempfile::TempDir>> = Default::default();
    conformance::run_all(
        || {
            let tmp = tempfile::tempdir().unwrap();
            let store = LocalStore::new(tmp.path()).unwrap();
            dirs.lock().unwrap().push(tmp);
            async move { store }
        },
        Profile::REAL,
    )
    .await;
}

/// The same contract with the references' durability and calls on the calling thread: on a
/// current-thread runtime (inline) and on a multi-thread one (`block_in_place`).
async fn local_store_conforms_with(durability: Durability, io: FileIo) {
    let dirs: std::sync::Mutex<Vec<tempfile::TempDir>> = Default::default();
    conformance::run_all(
        || {
            let tmp = tempfile::tempdir().unwrap();
            let store = LocalStore::new(tmp.path())
                .unwrap()
                .with_durability(durability)
                .with_file_io(io);
            dirs.lock().unwrap().push(tmp);
            async move { store }
        },
        Profile::REAL,
    )
    .await;
}

#[tokio::test]
async fn local_store_conforms_ordered_inline_on_one_thread() {
    local_store_conforms_with(Durability::Ordered, FileIo::Inline).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_store_conforms_synced_inline_on_many_threads() {
    local_store_conforms_with(Durability::Synced, FileIo::Inline).await;
}

#[test]
fn durability_reads_as_the_cli_writes_it() {
    assert_eq!("synced".parse::<Durability>(), Ok(Durability::Synced));
    assert_eq!("ordered".parse::<Durability>(), Ok(Durability::Ordered));
    assert_eq!(Durability::default(), Durability::Synced);
    let err = "fast".parse::<Durability>().unwrap_err();
    assert!(err.contains("synced") && err.contains("ordered"), "{err}");
    assert_eq!(Durability::Ordered.to_string(), "ordered");
}

#[tokio::test]
async fn local_store_shows_real_directory_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let tool = MemoryTool::new(LocalStore::new(tmp.path()).unwrap());
    for (p, text) in [
        ("/memories/a/x.md", "hello"),
        ("/memories/b.md", "eighteen bytes!!!\n"),
    ] {
        let r = tool
            .execute(json!({"command": "create", "path": p, "file_text": text}))
            .await;
        assert!(!r.is_error, "{r:?}");
    }
    let size = |rel: &str| human_size(std::fs::metadata(tmp.path().join(rel)).unwrap().len());
    let out = tool
        .execute(json!({"command": "view", "path": "/memories"}))
        .await
        .content;
    assert_eq!(
        out,
        format!(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n{}\t/memories\n{}\t/memories/a/\n5B\t/memories/a/x.md\n18B\t/memories/b.md",
            size("memories"),
            size("memories/a")
        )
    );
}

#[tokio::test]
async fn local_store_reads_sdk_layout() {
    // The official SDKs' local memory tools keep `/memories` at `<base>/memories`.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("memories/sdk")).unwrap();
    std::fs::write(tmp.path().join("memories/sdk/note.md"), "from the sdk\n").unwrap();
    let tool = MemoryTool::new(LocalStore::new(tmp.path()).unwrap());
    let out = tool
        .execute(json!({"command": "view", "path": "/memories/sdk/note.md"}))
        .await;
    assert_eq!(
        out.content,
        "Here's the content of /memories/sdk/note.md with line numbers:\n     1\tfrom the sdk\n     2\t"
    );
}
