//! No import circles inside a folder of `src/`.
//!
//! Within each folder, the nodes are its modules: each file (`x.rs`) or
//! subfolder (`x/`, with its files) beside the folder's root file. A node
//! imports a sibling when one of its files names it: `super::x`,
//! `crate::folder::x`, `self::x`, grouped or not. Test modules are left out.
//! The layer test checks the top level; this one each folder below it.
//!
//! Reads files only; it must not build, start or import anything of the agent.

use std::collections::{BTreeMap, BTreeSet};

use super::source::{is_test_file, masked, named_paths, test_module_paths, without_test_modules};
use super::{module_path, read, source_files};

/// Per folder (its module path), each node's siblings it imports.
type Graphs = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

/// The import graphs of every folder below the top level, from the files
/// (relative path, text).
fn folder_graphs(files: &[(String, String)]) -> Graphs {
    let code: Vec<(String, String)> = files
        .iter()
        .map(|(relative, text)| (relative.clone(), masked(text)))
        .collect();
    let tests = test_module_paths(&code);
    let modules: BTreeSet<Vec<String>> = code.iter().map(|(r, _)| module_path(r)).collect();
    let is_module = |folder: &[String], name: &str| {
        modules
            .iter()
            .any(|m| m.len() > folder.len() && m.starts_with(folder) && m[folder.len()] == name)
    };
    let mut graphs = Graphs::new();
    for (relative, code) in &code {
        if is_test_file(relative, &tests) {
            continue;
        }
        let from = module_path(relative);
        for (_, named) in named_paths(&without_test_modules(code), &from) {
            let shared = from.iter().zip(&named).take_while(|(a, b)| a == b).count();
            if shared == 0 || shared >= from.len() || shared >= named.len() {
                continue; // the top level, the folder's root, or a path inside the file
            }
            let folder = &from[..shared];
            if is_module(folder, &named[shared]) {
                graphs
                    .entry(folder.to_vec())
                    .or_default()
                    .entry(from[shared].clone())
                    .or_default()
                    .insert(named[shared].clone());
            }
        }
    }
    graphs
}

/// One circle through each group of nodes that reach one another, as the
/// nodes in order, the first repeated at the end.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for start in graph.keys() {
        if done.contains(start) || !reach(start).contains(start) {
            continue;
        }
        // The shortest way back to `start`, breadth first.
        let mut back: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        'search: while let Some(n) = queue.pop_front() {
            for next in graph.get(&n).into_iter().flatten() {
                if next == start {
                    back.insert(start.clone(), n.clone());
                    break 'search;
                }
                if !back.contains_key(next) {
                    back.insert(next.clone(), n.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        let mut circle = vec![start.clone()];
        let mut at = back[start].clone();
        while at != *start {
            circle.push(at.clone());
            at = back[&at].clone();
        }
        circle.push(start.clone());
        circle.reverse();
        let group = reach(start);
        done.extend(
            graph
                .keys()
                .filter(|k| group.contains(*k) && reach(k).contains(start))
                .cloned(),
        );
        out.push(circle);
    }
    out
}

/// Every circle in the folders of `files`, as `src/folder/: a.rs -> b/ -> a.rs`.
fn reported(files: &[(String, String)]) -> Vec<String> {
    let relatives: BTreeSet<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    let mut out = Vec::new();
    for (folder, graph) in folder_graphs(files) {
        let dir = format!("src/{}/", folder.join("/"));
        let name = |node: &str| {
            if relatives.contains(format!("{dir}{node}.rs").as_str()) {
                format!("{node}.rs")
            } else {
                format!("{node}/")
            }
        };
        for circle in circles(&graph) {
            let names: Vec<String> = circle.iter().map(|n| name(n)).collect();
            out.push(format!("{dir}: {}", names.join(" -> ")));
        }
    }
    out
}

#[test]
fn no_folder_of_src_has_an_import_circle() {
    let files: Vec<(String, String)> = source_files()
        .into_iter()
        .map(|(relative, path)| (relative, read(&path)))
        .collect();
    assert!(
        files.len() > 100,
        "only {} files found under src/",
        files.len()
    );
    let found = reported(&files);
    assert!(
        found.is_empty(),
        "import circles inside folders of src/ (cut each by a leaf file, or by \
         moving the one item that ties them):\n{}",
        found.join("\n")
    );
}

/// The finder sees a circle however its imports are written, and takes no
/// import of the folder's root, of a test module or inside a file for one.
#[test]
fn the_circle_finder_sees_each_way_of_naming_a_sibling() {
    let file = |relative: &str, text: &str| (relative.to_string(), text.to_string());
    let clean = [
        file(
            "src/a/mod.rs",
            "mod x;\nmod y;\n#[cfg(test)]\nmod tests;\nuse self::x::X;\n",
        ),
        file("src/a/x.rs", "use super::y::Y;\nuse super::A;\n"),
        file(
            "src/a/y.rs",
            "// use super::x::X;\nlet s = \"super::x\";\nfn f() { self::g() }\n",
        ),
        file("src/a/tests.rs", "use super::x::X;\nuse super::y::Y;\n"),
        file(
            "src/a/z.rs",
            "#[cfg(test)]\nmod tests {\n    use super::super::x::X;\n}\n",
        ),
        file(
            "src/a/x/deep.rs",
            "use super::super::y::Y;\nuse super::super::A;\n",
        ),
    ];
    assert_eq!(reported(&clean), Vec::<String>::new());
    let ways = [
        "use super::x::X;\n",
        "use crate::a::x;\n",
        "use crate::{a::{x::X, y}, b};\n",
        "use super::{\n    x::{self, X},\n};\n",
        "fn f() -> crate::a::x::X { todo!() }\n",
    ];
    for way in ways {
        let mut files = clean.to_vec();
        files[2] = file("src/a/y.rs", way);
        assert_eq!(
            reported(&files),
            ["src/a/: x.rs -> y.rs -> x.rs"],
            "not seen: {way:?}"
        );
    }
    let mut three = clean.to_vec();
    three[4] = file("src/a/z.rs", "use super::x::X;\n");
    three[2] = file("src/a/y.rs", "use super::z::Z;\n");
    assert_eq!(reported(&three), ["src/a/: x.rs -> y.rs -> z.rs -> x.rs"]);
}
