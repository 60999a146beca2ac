//! The memory-tool commands of the cost tables (docs/costs.md), shared by the tests that count
//! them through the library and through the CLI, so that both tables are of the same commands.

use serde_json::{Value, json};

/// A command of the tables: its name (the table's first column), the tool inputs that set it up
/// (the files it needs) and the command counted.
#[derive(Debug, Clone)]
pub struct Case {
    /// The row's name.
    pub name: &'static str,
    /// Inputs run before, not counted.
    pub setup: Vec<Value>,
    /// The `memory` tool input counted.
    pub run: Value,
}

/// At least 64 KiB of short lines of words and numbers, the same on every call.
pub fn big_text() -> String {
    let mut text = String::new();
    let mut i = 0u64;
    while text.len() < 64 << 10 {
        text.push_str(&format!(
            "line {i}: the deploy of service-{i} moved to rack r{}\n",
            i % 17
        ));
        i += 1;
    }
    text
}

/// The `memory` commands of the tables, on files under `dir` (`/memories/...`). A case whose
/// name says "refused" is answered with an error.
pub fn tool_cases(dir: &str) -> Vec<Case> {
    let create = |p: &str, text: &str| json!({"command": "create", "path": format!("{dir}/{p}"), "file_text": text});
    let at = |p: &str| format!("{dir}/{p}");
    let big = big_text();
    vec![
        Case {
            name: "view a file",
            setup: vec![create("v.md", "one\n")],
            run: json!({"command": "view", "path": at("v.md")}),
        },
        Case {
            name: "view a directory (3 files)",
            setup: (0..3)
                .map(|i| create(&format!("d/f{i}.md"), "x\n"))
                .collect(),
            run: json!({"command": "view", "path": at("d")}),
        },
        Case {
            name: "create a new file",
            setup: vec![],
            run: create("n.md", "new\n"),
        },
        Case {
            name: "create over a file (refused)",
            setup: vec![create("o.md", "old\n")],
            run: create("o.md", "again\n"),
        },
        Case {
            name: "str_replace",
            setup: vec![create("s.md", "one\ntwo\n")],
            run: json!({"command": "str_replace", "path": at("s.md"), "old_str": "two", "new_str": "2"}),
        },
        Case {
            name: "insert",
            setup: vec![create("i.md", "one\n")],
            run: json!({"command": "insert", "path": at("i.md"), "insert_line": 1, "insert_text": "two\n"}),
        },
        Case {
            name: "delete a file",
            setup: vec![create("x.md", "gone\n")],
            run: json!({"command": "delete", "path": at("x.md")}),
        },
        Case {
            name: "delete a directory of 10",
            setup: (0..10)
                .map(|i| create(&format!("ten/f{i}.md"), "x\n"))
                .collect(),
            run: json!({"command": "delete", "path": at("ten")}),
        },
        Case {
            name: "rename a file",
            setup: vec![create("r.md", "moved\n")],
            run: json!({"command": "rename", "old_path": at("r.md"), "new_path": at("r2.md")}),
        },
        Case {
            name: "view a 64 KiB file",
            setup: vec![create("big-v.md", &big)],
            run: json!({"command": "view", "path": at("big-v.md")}),
        },
        Case {
            name: "create a 64 KiB file",
            setup: vec![],
            run: create("big-n.md", &big),
        },
        Case {
            name: "str_replace in a 64 KiB file",
            setup: vec![create("big-s.md", &big)],
            run: json!({"command": "str_replace", "path": at("big-s.md"), "old_str": "line 7: ", "new_str": "line seven: "}),
        },
    ]
}

/// A row's counts, `None` where a count does not apply (shown as `-`).
pub type Counts = Vec<Option<u64>>;

/// A cost table kept in a Markdown file between two marker comments, that a test measures again
/// and holds: a count that grows fails, one that shrinks asks for the table to be updated
/// (`CONTEXTQ_UPDATE_COSTS=1` writes the measured rows in, keeping rows not measured this run).
#[derive(Debug, Clone)]
pub struct Table {
    /// The file.
    pub path: std::path::PathBuf,
    /// The comment line that opens the table.
    pub begin: &'static str,
    /// The comment line that closes it.
    pub end: &'static str,
    /// The names of the two columns that name a row (`command`, `store`).
    pub keys: [&'static str; 2],
    /// The column names after those.
    pub columns: Vec<&'static str>,
}

/// The table of what each command costs on each ContextQ store (docs/costs.md, first table; the
/// test `costs::the_cost_table_holds` of this crate measures it) in the file at `path`.
pub fn contextq_table(path: std::path::PathBuf) -> Table {
    Table {
        path,
        begin: "<!-- costs:begin (written by the test costs::the_cost_table_holds) -->",
        end: "<!-- costs:end -->",
        keys: ["command", "store"],
        columns: vec![
            "HTTP requests",
            "SQL statements",
            "round trips",
            "write transactions",
            "flushes",
            "rows written",
            "bytes to the database",
        ],
    }
}

/// Slack allowed to a count, by column index and recorded value (0: exact).
pub type Slack = fn(usize, u64) -> u64;

impl Table {
    /// The table's rows in `text`, by their two keys (command, store); rows of another shape are
    /// left out.
    pub fn read(&self, text: &str) -> std::collections::BTreeMap<(String, String), Counts> {
        let Some(start) = text.find(self.begin) else {
            return Default::default();
        };
        let end = text[start..]
            .find(self.end)
            .map_or(text.len(), |e| start + e);
        text[start + self.begin.len()..end]
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with(&format!("| {} |", self.keys[0])))
            .filter_map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                let [command, store, counts @ ..] = cells.as_slice() else {
                    return None;
                };
                (counts.len() == self.columns.len()).then(|| {
                    let counts = counts.iter().map(|c| c.parse().ok()).collect();
                    ((command.to_string(), store.to_string()), counts)
                })
            })
            .collect()
    }

    /// The table's text for `rows`, in the order of `commands` (first key), then of `stores`
    /// (second key).
    pub fn render(
        &self,
        rows: &std::collections::BTreeMap<(String, String), Counts>,
        commands: &[&str],
        stores: &[&str],
    ) -> String {
        let mut out = format!(
            "{}\n| {} | {} | {} |\n|---|---|{}\n",
            self.begin,
            self.keys[0],
            self.keys[1],
            self.columns.join(" | "),
            "---|".repeat(self.columns.len())
        );
        for command in commands {
            for store in stores {
                if let Some(c) = rows.get(&(command.to_string(), store.to_string())) {
                    let cells: Vec<String> = c
                        .iter()
                        .map(|n| n.map_or("-".to_string(), |n| n.to_string()))
                        .collect();
                    out.push_str(&format!(
                        "| {command} | {store} | {} |\n",
                        cells.join(" | ")
                    ));
                }
            }
        }
        out.push_str(self.end);
        out
    }

    /// Holds `measured` against the file (see [`Table`]); panics with the rows that moved.
    pub fn hold(
        &self,
        measured: &std::collections::BTreeMap<(String, String), Counts>,
        commands: &[&str],
        stores: &[&str],
        slack: Slack,
    ) {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let recorded = self.read(&text);
        if std::env::var("CONTEXTQ_UPDATE_COSTS").as_deref() == Ok("1") {
            let mut rows = recorded;
            rows.extend(measured.clone());
            let block = self.render(&rows, commands, stores);
            let updated = match (text.find(self.begin), text.find(self.end)) {
                (Some(b), Some(e)) => {
                    format!("{}{block}{}", &text[..b], &text[e + self.end.len()..])
                }
                _ => format!("{text}\n{block}\n"),
            };
            std::fs::write(&self.path, updated).expect("the table's file is writable");
            return;
        }
        let (mut grew, mut shrank) = (Vec::new(), Vec::new());
        for (row, now) in measured {
            let line = |was: &dyn std::fmt::Debug| {
                format!(
                    "{} on {}: {was:?} -> {now:?} ({})",
                    row.0,
                    row.1,
                    self.columns.join(", ")
                )
            };
            let Some(was) = recorded.get(row) else {
                grew.push(line(&"not in the table"));
                continue;
            };
            let (mut up, mut down) = (false, false);
            for (i, (n, w)) in now.iter().zip(was).enumerate() {
                match (n, w) {
                    (Some(n), Some(w)) if *n > w + slack(i, *w) => up = true,
                    (Some(n), Some(w)) if n + slack(i, *w) < *w => down = true,
                    (Some(_), None) | (None, Some(_)) => up = true,
                    _ => {}
                }
            }
            if up {
                grew.push(line(was));
            } else if down {
                shrank.push(line(was));
            }
        }
        // A row of a store measured now that is no longer measured: that work is gone.
        let stores: std::collections::BTreeSet<&String> = measured.keys().map(|(_, s)| s).collect();
        for (row, was) in &recorded {
            if stores.contains(&row.1) && !measured.contains_key(row) {
                shrank.push(format!("{} on {}: {was:?} -> no longer done", row.0, row.1));
            }
        }
        let file = self.path.display();
        assert!(
            grew.is_empty(),
            "a command costs more than {file} says (say why there, then update it with CONTEXTQ_UPDATE_COSTS=1):\n{}",
            grew.join("\n")
        );
        assert!(
            shrank.is_empty(),
            "a command costs less than {file} says: update the table (CONTEXTQ_UPDATE_COSTS=1):\n{}",
            shrank.join("\n")
        );
    }
}
