//! Fuzzes `execute` with arbitrary JSON on a MemoryStore: never a panic, always a result whose
//! content starts with `Error: ` exactly when it is an error.
#![no_main]

use contextq_memory_tool::{MemoryStore, MemoryTool, MemoryToolHandlers};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let tool = MemoryTool::new(MemoryStore::new());
    rt.block_on(async {
        for line in data.split(|b| *b == b'\n') {
            let Ok(input) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
            let r = tool.execute(input).await;
            assert_eq!(r.is_error, r.content.starts_with("Error: "));
        }
    });
});
