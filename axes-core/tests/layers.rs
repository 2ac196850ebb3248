//! The modules of `axes-core` form layers: a module may use only its own layer and earlier
//! ones. This test reads every source file, finds each path into another top-level module
//! (`use crate::..`, inline `crate::..` and `super::..` paths, and the crate-root macros by
//! the module that defines them) and fails on a path that points to a later layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, earliest first; each is the top-level modules it holds.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["element", "halves", "num", "math"],
    &["axis"],
    &["list", "named"],
    &["layout"],
    &["ir"],
    &["protocol"],
    &["storage"],
    &["engine"],
    &["tensor"],
    &["expr"],
    &["dispatch"],
    &["eval", "arena", "io"],
    &["contract", "spatial"],
    &["autodiff"],
    &["nn", "optim"],
    &["record"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `eval/ext.rs` is `[eval, ext]`, `ir/mod.rs` is `[ir]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments (doc links are not imports) and string literals.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let mut in_string = false;
        let mut escaped = false;
        for c in line.chars() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
                continue;
            }
            if c == '"' {
                in_string = true;
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The first segments after each `crate::` in `code`, braces of grouped imports opened.
fn crate_targets(code: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `axes_crate::`, not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut end = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = j;
                    break;
                }
            }
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        targets.push(first_segment(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            targets.push(first_segment(rest));
        }
    }
    targets.retain(|t| !t.is_empty());
    targets
}

fn first_segment(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules that `super::` paths in a file at `module` reach outside it.
fn super_targets(code: &str, module: &[String]) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let before = rest[..i].chars().last();
        rest = &rest[i..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            rest = &rest["super::".len()..];
            continue;
        }
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        // Inside an inline `mod tests`, `super` is the file's own module: count it as such
        // (a file's inline modules never reach further up than the file itself here).
        let depth = module.len();
        let target = first_segment(rest);
        if ups >= depth && !target.is_empty() {
            targets.push(target);
        }
    }
    targets
}

#[test]
fn every_module_uses_only_its_own_layer_or_earlier_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();

    // Macros exported at the crate root, by the module that defines them.
    let mut macro_home: BTreeMap<String, String> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let module = module_path(&src, file);
        let mut exported = false;
        for line in text.lines() {
            let line = line.trim();
            if line == "#[macro_export]" {
                exported = true;
            } else if let Some(name) = line.strip_prefix("macro_rules! ") {
                if exported && !module.is_empty() {
                    macro_home.insert(first_segment(name), module[0].clone());
                }
                exported = false;
            }
        }
    }

    let mut unknown = BTreeSet::new();
    let mut upward: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in &files {
        let module = module_path(&src, file);
        let Some(top) = module.first().filter(|top| *top != "lib") else {
            continue; // lib.rs: the root re-exports every layer
        };
        let Some(own) = layer_of(top) else {
            unknown.insert(top.clone());
            continue;
        };
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let mut targets = crate_targets(&code);
        targets.extend(super_targets(&code, &module));
        for target in targets {
            let target = macro_home.get(&target).cloned().unwrap_or(target);
            if &target == top || ["__private", "prelude", "self"].contains(&target.as_str()) {
                continue;
            }
            match layer_of(&target) {
                // Crate-root re-exports (`crate::Tensor`) name no module: skip them.
                None if target.chars().next().is_some_and(char::is_uppercase) => {}
                None => {
                    unknown.insert(format!("{target} (used in {})", module.join("::")));
                }
                Some(layer) if layer > own => {
                    upward
                        .entry((top.clone(), target))
                        .or_default()
                        .push(module.join("::"));
                }
                Some(_) => {}
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules missing from LAYERS (place each in a layer): {unknown:?}"
    );
    let problems: Vec<String> = upward
        .iter()
        .map(|((from, to), users)| {
            let mut users = users.clone();
            users.dedup();
            format!(
                "`{from}` (layer {}) uses the later layer `{to}` (layer {}) in {}",
                layer_of(from).unwrap(),
                layer_of(to).unwrap(),
                users.join(", ")
            )
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_imports_and_super_paths() {
    let code = code_of(
        "use crate::{expr::Expr, ir::{Ir, IrNode}};\n\
         let x = crate::dispatch::run(); // crate::nn in a comment\n\
         let s = \"crate::optim\";\n\
         use super::super::tensor::Tensor;",
    );
    assert_eq!(crate_targets(&code), ["expr", "ir", "dispatch"]);
    let module = ["expr".to_string(), "eval".to_string()];
    assert_eq!(super_targets(&code, &module), ["tensor"]);
}
