//! The shape ARCHITECTURE.md promises, checked on every test run: in every crate, no two
//! files import each other through a chain (an import circle), no two top-level modules
//! either, and no function outside tests runs over 100 lines.
//!
//! The module tree is followed from each crate's `lib.rs`, `main.rs` and `bin/*.rs` through
//! its `mod` declarations, leaving out `#[cfg(test)]` modules and items. A file imports another
//! when a `use` or a path in its code names, through `crate::` or `super::`, an item of the
//! other's module or of a module below it. An item a module re-exports (`pub use x::Item`,
//! `pub(crate) use …`) counts as the module's that defines it, so that a name taken through a
//! parent's re-export still ties the file to the defining one. A module naming its own
//! ancestors' items is not counted: a child always sits below its parent. Circles are looked for
//! between files, and between the modules of every depth of the tree (a file folded into its
//! ancestor at that depth).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;
use syn::visit_mut::VisitMut;

/// Functions longer than this (lines, signature to closing brace) fail the check.
const MAX_FN_LINES: usize = 100;

type ModPath = Vec<String>;

struct SourceFile {
    path: PathBuf,
    module: ModPath,
    ast: syn::File,
}

fn workspace_crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the crates directory");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the crates directory")
        .map(|e| e.expect("a crates/ entry").path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() > 5, "found only {crates:?} under {root:?}");
    crates
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Drops every `#[cfg(test)]` item, at any depth: what is left is the code that ships.
struct StripTests;

impl VisitMut for StripTests {
    fn visit_file_mut(&mut self, f: &mut syn::File) {
        f.items.retain(|i| !is_cfg_test(item_attrs(i)));
        syn::visit_mut::visit_file_mut(self, f);
    }
    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if let Some((_, items)) = &mut m.content {
            items.retain(|i| !is_cfg_test(item_attrs(i)));
        }
        syn::visit_mut::visit_item_mod_mut(self, m);
    }
    fn visit_item_impl_mut(&mut self, i: &mut syn::ItemImpl) {
        i.items.retain(|item| match item {
            syn::ImplItem::Fn(f) => !is_cfg_test(&f.attrs),
            syn::ImplItem::Const(c) => !is_cfg_test(&c.attrs),
            _ => true,
        });
        syn::visit_mut::visit_item_impl_mut(self, i);
    }
    fn visit_block_mut(&mut self, b: &mut syn::Block) {
        b.stmts
            .retain(|s| !matches!(s, syn::Stmt::Item(i) if is_cfg_test(item_attrs(i))));
        syn::visit_mut::visit_block_mut(self, b);
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The crate's non-test source files, each with its module path, from one root file.
fn load_tree(file: &Path, module: ModPath, out: &mut Vec<SourceFile>) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    let mut ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    StripTests.visit_file_mut(&mut ast);
    // A `foo.rs` keeps its children in `foo/`; `mod.rs`, `lib.rs` and `main.rs` beside them.
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let dir = match stem {
        "mod" | "lib" | "main" => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    for item in &ast.items {
        if let syn::Item::Mod(m) = item {
            if m.content.is_some() {
                continue;
            }
            let name = m.ident.to_string();
            let (flat, nested) = (
                dir.join(format!("{name}.rs")),
                dir.join(&name).join("mod.rs"),
            );
            let child = if flat.exists() { flat } else { nested };
            let mut path = module.clone();
            path.push(name);
            load_tree(&child, path, out);
        }
    }
    out.push(SourceFile {
        path: file.to_path_buf(),
        module,
        ast,
    });
}

fn crate_files(krate: &Path) -> Vec<SourceFile> {
    let src = krate.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        roots.extend(bins.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
    }
    let mut files = Vec::new();
    for root in roots {
        // Each binary is a crate of its own; its modules are kept apart by its name.
        let base = match root.file_stem().and_then(|s| s.to_str()) {
            Some("lib") => vec![],
            Some(name) => vec![format!("bin:{name}")],
            None => continue,
        };
        load_tree(&root, base, &mut files);
    }
    files
}

/// Every `crate::…` and `super::…` path a file names (its test code stripped already), resolved to
/// absolute module paths (the item's last segment included; the caller trims).
#[derive(Default)]
struct Names {
    here: ModPath,
    crate_root: usize,
    found: Vec<ModPath>,
}

impl Names {
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut path, rest) = match first.as_str() {
            "crate" => (self.here[..self.crate_root].to_vec(), &segments[1..]),
            "self" => (self.here.clone(), &segments[1..]),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let keep = self.here.len().checked_sub(ups)?.max(self.crate_root);
                (self.here[..keep].to_vec(), &segments[ups..])
            }
            _ => return None,
        };
        path.extend(rest.iter().cloned());
        Some(path)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_path(prefix, Some(n.ident.to_string())),
            syn::UseTree::Rename(r) => self.use_path(prefix, Some(r.ident.to_string())),
            syn::UseTree::Glob(_) => self.use_path(prefix, None),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn use_path(&mut self, prefix: &[String], last: Option<String>) {
        let mut segments = prefix.to_vec();
        segments.extend(last.filter(|l| l != "self"));
        if let Some(p) = self.absolute(&segments) {
            self.found.push(p);
        }
    }
}

impl<'a> Visit<'a> for Names {
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(abs) = self.absolute(&segments) {
            self.found.push(abs);
        }
        syn::visit::visit_path(self, p);
    }
    /// A macro's arguments, where they are expressions (`format!`, `vec!`, `assert!`): the
    /// paths in them count as any other.
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        use syn::punctuated::Punctuated;
        let args = m.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated);
        for e in args.iter().flatten() {
            self.visit_expr(e);
        }
        syn::visit::visit_macro(self, m);
    }
}

/// Where a module's re-exported names come from: `(module, name)` → the absolute path it names
/// (`pub use a::b::Item;` in `m` maps `(m, Item)` to `a::b::Item`; `as` renames are followed).
type ReExports = BTreeMap<(ModPath, String), ModPath>;

fn crate_root_of(module: &ModPath) -> usize {
    usize::from(module.first().is_some_and(|m| m.starts_with("bin:")))
}

/// The named re-exports of every file (globs are not followed). A re-export's path may start
/// at a child module (`pub use access::Item;` in the child's parent).
fn re_exports(files: &[SourceFile]) -> ReExports {
    let modules: BTreeSet<&ModPath> = files.iter().map(|f| &f.module).collect();
    let resolve = |names: &Names, full: &[String]| {
        names.absolute(full).or_else(|| {
            let mut child = names.here.clone();
            child.push(full.first()?.clone());
            modules.contains(&child).then(|| {
                let mut abs = names.here.clone();
                abs.extend(full.iter().cloned());
                abs
            })
        })
    };
    fn walk(
        names: &Names,
        resolve: &dyn Fn(&Names, &[String]) -> Option<ModPath>,
        prefix: &mut Vec<String>,
        tree: &syn::UseTree,
        out: &mut Vec<(String, ModPath)>,
    ) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(names, resolve, prefix, &p.tree, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident != "self" => {
                let mut full = prefix.clone();
                full.push(n.ident.to_string());
                if let Some(abs) = resolve(names, &full) {
                    out.push((n.ident.to_string(), abs));
                }
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                if let Some(abs) = resolve(names, &full) {
                    out.push((r.rename.to_string(), abs));
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(names, resolve, prefix, t, out);
                }
            }
            _ => {}
        }
    }
    let mut map = ReExports::new();
    for f in files {
        let names = Names {
            here: f.module.clone(),
            crate_root: crate_root_of(&f.module),
            ..Names::default()
        };
        for item in &f.ast.items {
            let syn::Item::Use(u) = item else { continue };
            if matches!(u.vis, syn::Visibility::Inherited) {
                continue;
            }
            let mut found = Vec::new();
            walk(&names, &resolve, &mut Vec::new(), &u.tree, &mut found);
            for (name, abs) in found {
                map.insert((f.module.clone(), name), abs);
            }
        }
    }
    map
}

/// Module → the modules (files) it imports from, ancestors left out.
fn import_graph(files: &[SourceFile]) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let modules: BTreeSet<&ModPath> = files.iter().map(|f| &f.module).collect();
    let file_of = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains(p))
    };
    let exports = re_exports(files);
    // The file that defines what `path` names: through re-exports, at most a few hops.
    let defined_in = |path: &ModPath| {
        let mut path = path.clone();
        for _ in 0..8 {
            let file = file_of(&path)?;
            let Some(name) = path.get(file.len()) else {
                return Some(file);
            };
            match exports.get(&(file.clone(), name.clone())) {
                Some(origin) => {
                    let mut next = origin.clone();
                    next.extend(path[file.len() + 1..].iter().cloned());
                    path = next;
                }
                None => return Some(file),
            }
        }
        file_of(&path)
    };
    let mut graph = BTreeMap::new();
    for f in files {
        let mut names = Names {
            here: f.module.clone(),
            crate_root: crate_root_of(&f.module),
            ..Names::default()
        };
        names.visit_file(&f.ast);
        let edges: BTreeSet<ModPath> = names
            .found
            .iter()
            .filter_map(&defined_in)
            .filter(|t| !f.module.starts_with(t))
            .collect();
        graph.insert(f.module.clone(), edges);
    }
    graph
}

/// The graph's strongly connected components of more than one node (Tarjan).
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Tarjan<'g, N> {
        graph: &'g BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, (usize, usize)>,
        stack: Vec<N>,
        next: usize,
        found: Vec<Vec<N>>,
    }
    impl<N: Ord + Clone> Tarjan<'_, N> {
        fn visit(&mut self, v: &N) {
            self.index.insert(v.clone(), (self.next, self.next));
            self.next += 1;
            self.stack.push(v.clone());
            for w in self.graph.get(v).into_iter().flatten() {
                let low = match self.index.get(w) {
                    None => {
                        self.visit(w);
                        self.index[w].1
                    }
                    Some(&(i, _)) if self.stack.contains(w) => i,
                    Some(_) => continue,
                };
                let entry = self.index.get_mut(v).unwrap();
                entry.1 = entry.1.min(low);
            }
            let (i, low) = self.index[v];
            if i == low {
                let at = self.stack.iter().rposition(|n| n == v).unwrap();
                let component = self.stack.split_off(at);
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

fn show(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("::")
    }
}

/// `graph` with each module folded into its ancestor `depth` levels down (a shallower one
/// stays itself); edges within one folded module dropped.
fn folded(
    graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    depth: usize,
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let fold = |m: &ModPath| m.iter().take(depth).cloned().collect::<ModPath>();
    let mut out: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, tos) in graph {
        let entry = out.entry(fold(from)).or_default();
        entry.extend(tos.iter().map(fold).filter(|t| *t != fold(from)));
    }
    out
}

#[test]
fn no_import_circle_between_files_or_modules_at_any_depth() {
    let mut found = Vec::new();
    for krate in workspace_crates() {
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        let graph = import_graph(&crate_files(&krate));
        let deepest = graph.keys().map(Vec::len).max().unwrap_or(0);
        let mut levels = vec![("files".to_string(), graph.clone())];
        for depth in 1..deepest {
            levels.push((format!("modules at depth {depth}"), folded(&graph, depth)));
        }
        // A circle of files is one of their modules too: each is said once, where first seen.
        let mut seen = BTreeSet::new();
        for (level, g) in &levels {
            for c in circles(g) {
                let names: Vec<String> = c.iter().map(show).collect();
                let mut key = names.clone();
                key.sort();
                if seen.insert(key) {
                    found.push(format!("{name}, {level}: {}", names.join(" → ")));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "import circles (each line: modules that reach each other through `use`; move what \
         they share below them all):\n{}",
        found.join("\n")
    );
}

/// The functions (and methods) of a file, its test code stripped, over the limit.
struct Lengths<'f> {
    file: &'f Path,
    long: Vec<String>,
}

impl Lengths<'_> {
    /// Lines from `fn` to the closing brace (doc comments and attributes not counted).
    fn check(&mut self, sig: &syn::Signature, body: &syn::Block) {
        let (start, end) = (
            sig.fn_token.span.start().line,
            body.brace_token.span.close().end().line,
        );
        let lines = end - start + 1;
        if lines > MAX_FN_LINES {
            let at = self.file.display();
            self.long
                .push(format!("{at}:{start} {}: {lines} lines", sig.ident));
        }
    }
}

impl<'a> Visit<'a> for Lengths<'_> {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.check(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.check(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.check(&f.sig, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_outside_tests_runs_over_100_lines() {
    let mut long = Vec::new();
    let mut counted = 0;
    for krate in workspace_crates() {
        for f in crate_files(&krate) {
            let mut l = Lengths {
                file: &f.path,
                long: Vec::new(),
            };
            l.visit_file(&f.ast);
            long.append(&mut l.long);
            counted += 1;
        }
    }
    assert!(counted > 100, "read only {counted} files");
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (a long orchestration function is a type \
         waiting to be named):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checks_see_a_circle_and_a_long_function() {
    // A circle of three and a self-contained pair of modules that is not one.
    let m = |s: &str| -> ModPath { s.split("::").map(String::from).collect() };
    let mut g = BTreeMap::new();
    g.insert(m("a"), BTreeSet::from([m("b")]));
    g.insert(m("b"), BTreeSet::from([m("c")]));
    g.insert(m("c"), BTreeSet::from([m("a"), m("d")]));
    g.insert(m("d"), BTreeSet::new());
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3);

    // `super::super::x` from `a::b::c` is `a::x`; `crate::y::z` is `y::z`.
    let names = Names {
        here: m("a::b::c"),
        ..Names::default()
    };
    let words = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(names.absolute(&words("super::super::x")), Some(m("a::x")));
    assert_eq!(names.absolute(&words("crate::y::z")), Some(m("y::z")));
    assert_eq!(names.absolute(&words("std::io")), None);

    // A name taken through a parent's re-export ties the file to the one defining it, and a
    // path inside a macro's arguments counts: `m::a` and `m::b` reach each other.
    let file = |module: &str, text: &str| SourceFile {
        path: PathBuf::from(format!("{module}.rs")),
        module: m(module),
        ast: syn::parse_file(text).unwrap(),
    };
    let files = [
        file("m", "mod a; mod b; pub use a::Thing;"),
        file(
            "m::a",
            "pub struct Thing; fn f() -> String { format!(\"{}\", super::b::g()) }",
        ),
        file("m::b", "use super::Thing; pub fn g() -> usize { 1 }"),
    ];
    let found = circles(&import_graph(&files));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");

    let body = "/// Documented.\nfn long() {\n".to_string()
        + &"    let _ = 1;\n".repeat(MAX_FN_LINES)
        + "}\n";
    let ast = syn::parse_file(&body).unwrap();
    let mut l = Lengths {
        file: Path::new("x.rs"),
        long: Vec::new(),
    };
    l.visit_file(&ast);
    assert_eq!(
        l.long,
        vec![format!("x.rs:2 long: {} lines", MAX_FN_LINES + 2)]
    );

    // The same function in test code does not count.
    let tests = format!("#[cfg(test)]\nmod tests {{\n{body}}}\n");
    let mut ast = syn::parse_file(&tests).unwrap();
    StripTests.visit_file_mut(&mut ast);
    let mut l = Lengths {
        file: Path::new("x.rs"),
        long: Vec::new(),
    };
    l.visit_file(&ast);
    assert!(l.long.is_empty(), "{:?}", l.long);
}
