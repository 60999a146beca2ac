//! The shared conformance suite on `MemoryStoresStore` (feature `memory-stores`) against
//! contextq-server's Memory Stores door (`/v1`), on SQLite and PostgreSQL: each case in a
//! store of its own, made through the door; and one memory through two doors: a file the
//! memory tool writes through `ContextQStore` is read, edited and deleted through
//! `MemoryStoresStore`, and the other way round.
#![cfg(feature = "memory-stores")]

use crate::common;

use common::{ALL, Server, options};
use contextq_memory_tool::conformance::{self, Profile};
use contextq_memory_tool::memory_stores::{MemoryStoresOptions, MemoryStoresStore};
use contextq_memory_tool::store::{PutMode, Store};
use contextq_memory_tool::{Error, MemoryPath};
use contextq_server::{Backend, Plan};
use serde_json::{Value, json};

/// A store made through the door: its id and its workspace's slug.
async fn new_store(url: &str, key: &str) -> (String, String) {
    let r: Value = reqwest::Client::new()
        .post(format!("{url}/v1/memory_stores"))
        .bearer_auth(key)
        .json(&json!({"name": format!("conformance {:08x}", fastrand::u32(..))}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = r["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let slug = r["name"].as_str().unwrap().replace(' ', "-");
    (id, slug)
}

async fn the_suite_holds_over_the_door(b: Backend) {
    let server = Server::start(b).await;
    let (_tenant, key) = server.tenant(Plan::Unlimited, ALL, "first").await;
    let (url, key) = (&server.url, &key);
    conformance::run_all(
        || async move {
            let (id, _) = new_store(url, key).await;
            MemoryStoresStore::new(MemoryStoresOptions::new(url, key, &id)).unwrap()
        },
        Profile::MEMORY_STORES,
    )
    .await;
}

async fn one_file_through_two_doors(b: Backend) {
    let server = Server::start(b).await;
    let (_tenant, key) = server.tenant(Plan::Unlimited, ALL, "first").await;
    let (id, slug) = new_store(&server.url, &key).await;
    let door = MemoryStoresStore::new(MemoryStoresOptions::new(&server.url, &key, &id)).unwrap();
    let tool = options(&server.url, &key).workspace(slug).store().unwrap();
    let p = MemoryPath::parse("/memories/notes/a.md").unwrap();

    tool.put(&p, "from the tool\n", PutMode::Create)
        .await
        .unwrap();
    let seen = door
        .get(&p)
        .await
        .unwrap()
        .expect("the door sees the tool's file");
    assert_eq!(seen.content, "from the tool\n");
    let v = seen.version.unwrap();
    door.put(&p, "through the door\n", PutMode::Update(v.clone()))
        .await
        .unwrap();
    assert_eq!(
        tool.get(&p).await.unwrap().unwrap().content,
        "through the door\n"
    );
    // The version read before is stale now: refused, nothing written.
    let stale = door
        .put(&p, "stale\n", PutMode::Update(v))
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::Precondition { .. }), "{stale:?}");
    // Deleted and created again through the other door: an old version never matches the new
    // file, though its content is the same.
    let before = door.get(&p).await.unwrap().unwrap().version.unwrap();
    tool.delete(&p, None).await.unwrap();
    tool.put(&p, "through the door\n", PutMode::Create)
        .await
        .unwrap();
    let e = door.delete(&p, Some(before)).await.unwrap_err();
    assert!(
        matches!(e, Error::Precondition { .. } | Error::NotFound { .. }),
        "{e:?}"
    );
    door.delete(&p, None).await.unwrap();
    assert!(tool.get(&p).await.unwrap().is_none());
    assert!(matches!(
        door.delete(&p, None).await.unwrap_err(),
        Error::NotFound { .. }
    ));
    // Another tenant's key reaches nothing of it.
    let (_other, their_key) = server.tenant(Plan::Unlimited, ALL, "w").await;
    let theirs =
        MemoryStoresStore::new(MemoryStoresOptions::new(&server.url, &their_key, &id)).unwrap();
    let e = theirs.list(&MemoryPath::root()).await.unwrap_err();
    assert!(e.to_string().contains("404"), "{e}");
}

contextq_server::database_tests!(the_suite_holds_over_the_door, one_file_through_two_doors);
