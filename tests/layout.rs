//! The layout's size rules, kept true (docs/architecture.md): no file in
//! `src/`, `cli/src/` or `tests/` over 800 lines, no function in the two
//! crates' sources over 80. Files
//! are sized by what belongs together; the file limit only catches a file
//! that has grown two concerns.
//! Functions are found the way rustfmt lays them out: a `fn` line, and the
//! `}` at the same indentation that closes it.

use std::path::{Path, PathBuf};

const SRC_FILE_LINES: usize = 800;
const FN_LINES: usize = 80;
const TEST_FILE_LINES: usize = 800;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn repo(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(sub)
}

/// The name and length of each function whose body rustfmt spread over lines.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let Some(name) = fn_name(trimmed) else {
            continue;
        };
        if trimmed.ends_with(';') {
            continue; // a declaration in a trait or an extern block
        }
        let close = format!("{indent}}}");
        if let Some(len) = lines[start..].iter().position(|l| l.trim_end() == close) {
            found.push((name, start + 1, len + 1));
        }
    }
    found
}

/// `fn NAME` at the start of a (trimmed) line, after any qualifiers.
fn fn_name(trimmed: &str) -> Option<String> {
    let mut rest = trimmed;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(name[..end].to_string())
}

#[test]
fn no_source_file_over_800_lines_and_no_function_over_80() {
    let mut over = Vec::new();
    let sources = rust_files(&repo("src"))
        .into_iter()
        .chain(rust_files(&repo("cli/src")));
    for file in sources {
        let text = std::fs::read_to_string(&file).expect("read source");
        let n = text.lines().count();
        if n > SRC_FILE_LINES {
            over.push(format!("{}: {n} lines", file.display()));
        }
        for (name, line, len) in functions(&text) {
            if len > FN_LINES {
                over.push(format!(
                    "{}:{line}: fn {name} is {len} lines",
                    file.display()
                ));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over the layout's limits:\n{}",
        over.join("\n")
    );
}

#[test]
fn no_test_file_over_800_lines() {
    let over: Vec<String> = rust_files(&repo("tests"))
        .into_iter()
        .filter_map(|file| {
            let n = std::fs::read_to_string(&file).ok()?.lines().count();
            (n > TEST_FILE_LINES).then(|| format!("{}: {n} lines", file.display()))
        })
        .collect();
    assert!(
        over.is_empty(),
        "test files over {TEST_FILE_LINES} lines:\n{}",
        over.join("\n")
    );
}

#[test]
fn the_function_finder_sees_what_rustfmt_writes() {
    let text = "impl X {\n    pub(crate) fn a(&self) {\n        let b = 1;\n    }\n}\nfn c() -> u8;\nasync fn d() {\n}\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 2, 3), ("d".to_string(), 7, 2)]
    );
}
