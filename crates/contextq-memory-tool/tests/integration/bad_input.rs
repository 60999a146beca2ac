//! Property tests over arbitrary JSON tool inputs and paths: never a panic, always a tool
//! result (`Error: ` exactly when `is_error`), and nothing ever written outside the memory root.

use contextq_memory_tool::{LocalStore, MemoryStore, MemoryTool, MemoryToolHandlers, ToolResult};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn path() -> impl Strategy<Value = Value> {
    prop_oneof![
        "/memories(/[a-zA-Z0-9._ %-]{1,8}){0,4}/?".prop_map(Value::String),
        prop::sample::select(vec![
            "/memories/../etc/passwd",
            "/memories/..",
            "/memories/%2e%2e/x",
            "/memories/a%2fb",
            "/memories\\..\\x",
            "/memoriesX/a",
            "/",
            "",
            "../x",
            "/memories/./a",
            "/memories/a\u{0}b",
            "/memories//a//",
            "/etc/passwd",
            "/memories/ü/ñ.md",
            "/memories/node_modules/x",
            "/memories/.hidden",
        ])
        .prop_map(|s| Value::String(s.to_string())),
        any::<i64>().prop_map(|n| json!(n)),
        Just(Value::Null),
        "\\PC{0,20}".prop_map(Value::String),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,30}".prop_map(Value::String),
        "(line\n){0,5}".prop_map(Value::String),
    ]
}

fn input() -> impl Strategy<Value = Value> {
    let command = prop_oneof![
        prop::sample::select(vec![
            "view",
            "create",
            "str_replace",
            "insert",
            "delete",
            "rename",
            "bogus",
            ""
        ])
        .prop_map(|s| Value::String(s.to_string())),
        leaf(),
    ];
    let fields = prop::collection::vec(
        (
            prop::sample::select(vec![
                "path",
                "old_path",
                "new_path",
                "file_text",
                "old_str",
                "new_str",
                "insert_line",
                "insert_text",
                "view_range",
                "extra",
            ]),
            prop_oneof![
                path(),
                leaf(),
                prop::collection::vec(leaf(), 0..3).prop_map(Value::Array)
            ],
        ),
        0..7,
    );
    prop_oneof![
        4 => (command, fields).prop_map(|(c, f)| {
            let mut m = Map::new();
            m.insert("command".into(), c);
            for (k, v) in f {
                m.insert(k.to_string(), v);
            }
            Value::Object(m)
        }),
        1 => leaf(),
        1 => prop::collection::vec(leaf(), 0..3).prop_map(Value::Array),
    ]
}

fn well_formed(r: &ToolResult) {
    assert_eq!(r.is_error, r.content.starts_with("Error: "), "{r:?}");
    assert!(!r.content.is_empty());
}

fn outside_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    // The store lives in root/inner; only root/inner/memories may hold anything.
    let mut out = Vec::new();
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "inner" {
            out.push(e.path());
        }
    }
    for e in std::fs::read_dir(root.join("inner")).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "memories" {
            out.push(e.path());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(contextq_memory_tool::testing::proptest_cases(400)))]

    #[test]
    fn any_input_gives_a_result_and_never_escapes(inputs in prop::collection::vec(input(), 1..12)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mem = MemoryTool::new(MemoryStore::new());
            let tmp = tempfile::tempdir().unwrap();
            let local = MemoryTool::new(LocalStore::new(tmp.path().join("inner")).unwrap());
            for input in &inputs {
                let a = mem.execute(input.clone()).await;
                let b = local.execute(input.clone()).await;
                well_formed(&a);
                well_formed(&b);
                // Outside directory sizes, both stores answer alike.
                if !(a.content.contains("Here're the files") || b.content.contains("Here're the files")) {
                    prop_assert_eq!(&a, &b, "input {}", input);
                }
            }
            prop_assert!(outside_files(tmp.path()).is_empty(), "files outside the root: {:?}", outside_files(tmp.path()));
            Ok(())
        })?;
    }
}
