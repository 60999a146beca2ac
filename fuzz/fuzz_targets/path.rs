//! Fuzzes the path parser: never a panic; an accepted path is under the root, has no `.`/`..`
//! segment, no backslash or control character, and normalises idempotently.
#![no_main]

use contextq_memory_tool::MemoryPath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Ok(p) = MemoryPath::parse(raw) {
        let n = p.normalized();
        assert!(n == "/memories" || n.starts_with("/memories/"));
        assert!(!n.contains("//") && !n.contains('\\') && !n.chars().any(char::is_control));
        assert!(p.segments().iter().all(|s| s != "." && s != ".."));
        assert_eq!(MemoryPath::parse(&n).unwrap(), p);
    }
});
