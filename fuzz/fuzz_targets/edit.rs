//! Fuzzes the text edits the server applies for any client (`text-edit` extension) and the
//! memory tool applies in process: `contextq_api::edit::apply` never panics, and its answer
//! agrees with a plain reading of the command: `str_replace` replaces the one non-overlapping
//! occurrence (and says where), refuses none or several; `insert` adds the text's lines at the
//! line asked for, or refuses a line outside the file.
#![no_main]

use contextq_api::edit::{EditFailure, apply};
use contextq_api::TextEdit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, String, String, i64, bool)| {
    let (content, a, b, line, replace) = input;
    if replace {
        let edit = TextEdit::StrReplace { old_str: a.clone(), new_str: b.clone() };
        let found = if a.is_empty() { 0 } else { content.matches(a.as_str()).count() };
        match apply(&content, &edit) {
            Ok(done) => {
                assert_eq!(found, 1);
                assert_eq!(done.content, content.replacen(a.as_str(), &b, 1));
                let at = content.find(a.as_str()).unwrap();
                assert_eq!(done.changed_line, Some(1 + content[..at].matches('\n').count()));
            }
            Err(EditFailure::EmptyOldStr) => assert!(a.is_empty()),
            Err(EditFailure::NotFound) => assert_eq!(found, 0),
            Err(EditFailure::Multiple { lines }) => {
                assert!(found >= 2);
                assert!(lines.windows(2).all(|w| w[0] < w[1]), "{lines:?}");
            }
            Err(other) => panic!("str_replace failed with {other:?}"),
        }
    } else {
        let edit = TextEdit::Insert { line, text: b.clone() };
        let mut lines = content.split('\n').count();
        if content.is_empty() || content.ends_with('\n') {
            lines -= 1;
        }
        match apply(&content, &edit) {
            Ok(done) => {
                assert!(line >= 0 && line as usize <= lines);
                assert!(done.content.ends_with('\n'));
                let text = b.strip_suffix('\n').unwrap_or(&b);
                let added = text.split('\n').count();
                assert_eq!(done.content.split('\n').count() - 1, lines + added);
            }
            Err(EditFailure::LineOutOfRange { line: l, line_count }) => {
                assert_eq!((l, line_count), (line, lines));
                assert!(line < 0 || line as usize > lines);
            }
            Err(other) => panic!("insert failed with {other:?}"),
        }
    }
});
