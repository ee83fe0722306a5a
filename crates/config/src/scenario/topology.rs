//! Topology shapes (star, dumbbell, chain, tree) and explicit links, expanded into nodes and
//! links.
//!
//! - `star`: `center`, and `leaves = [{ node, link, up?, down? }]`: each leaf linked to the
//!   center (`down`: center → leaf, `up`: leaf → center; `link` both ways); `{ prefix = "r",
//!   count = 45, link }` is 45 leaves r1..r45 alike.
//! - `dumbbell`: `left` and `right` leaves (as a star's), two routers (`routers`, by default
//!   `["left", "right"]`) joined by the `bottleneck` profile.
//! - `chain`: `nodes = [...]` in order, hop `i` with `links[i]`, or every hop with `link`.
//! - `tree`: `root`, then `levels = [{ count, link, prefix }]`: every node of a level gets
//!   `count` children named `prefix` and a number (from 1, across the level), each linked to
//!   its parent with `link`.
//! - `[[link]]` tables add links to any shape (`between = [a, b]`, `link`, or `forward` a → b
//!   and `back` b → a), or make the whole topology with no `[topology]`.

use super::{LinkDecl, LinkProfile};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTopology {
    shape: String,
    center: Option<String>,
    leaves: Option<Vec<RawLeaf>>,
    left: Option<Vec<RawLeaf>>,
    right: Option<Vec<RawLeaf>>,
    bottleneck: Option<String>,
    routers: Option<[String; 2]>,
    nodes: Option<Vec<String>>,
    links: Option<Vec<String>>,
    link: Option<String>,
    root: Option<String>,
    levels: Option<Vec<RawLevel>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeaf {
    /// One leaf, or `count` of them named `prefix` and a number from 1.
    node: Option<String>,
    prefix: Option<String>,
    count: Option<usize>,
    link: Option<String>,
    up: Option<String>,
    down: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLevel {
    count: usize,
    link: String,
    prefix: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    between: [String; 2],
    link: Option<String>,
    forward: Option<String>,
    back: Option<String>,
}

/// The most nodes a `tree` may make.
const MAX_TREE_NODES: usize = 100_000;

struct Builder<'a> {
    profiles: &'a BTreeMap<String, LinkProfile>,
    nodes: Vec<String>,
    index: BTreeMap<String, usize>,
    links: Vec<LinkDecl>,
    offset: usize,
}

type Expanded = (Vec<String>, Vec<LinkDecl>);

/// The nodes and links of a topology; errors carry the offset of the table at fault.
pub(crate) fn expand(
    topology: Option<&Spanned<RawTopology>>,
    extra: &[Spanned<RawLink>],
    profiles: &BTreeMap<String, LinkProfile>,
) -> Result<Expanded, (String, usize)> {
    let mut b = Builder {
        profiles,
        nodes: Vec::new(),
        index: BTreeMap::new(),
        links: Vec::new(),
        offset: 0,
    };
    if let Some(t) = topology {
        b.offset = t.span().start;
        b.shape(t.get_ref()).map_err(|m| (m, b.offset))?;
    }
    for l in extra {
        b.offset = l.span().start;
        let r = l.get_ref();
        let both = r.link.as_deref();
        let fwd = r.forward.as_deref().or(both);
        let back = r.back.as_deref().or(both);
        let [a, z] = &r.between;
        b.link(a, z, fwd, back, "[[link]]")
            .map_err(|m| (m, b.offset))?;
    }
    if b.links.is_empty() {
        let message = "the scenario has no links: add [topology] (star, dumbbell, chain, tree) or [[link]] tables".to_string();
        return Err((message, 0));
    }
    Ok((b.nodes, b.links))
}

impl Builder<'_> {
    fn node(&mut self, name: &str) -> Result<(), String> {
        if name.is_empty() || name.contains(['*', ',', '"']) {
            return Err(format!(
                "'{name}' is not a usable node name (no '*', ',' or quotes; not empty)"
            ));
        }
        if !self.index.contains_key(name) {
            self.index.insert(name.to_string(), self.nodes.len());
            self.nodes.push(name.to_string());
        }
        Ok(())
    }

    fn profile(&self, name: Option<&str>, what: &str) -> Result<(String, LinkProfile), String> {
        let Some(name) = name else {
            return Err(format!(
                "{what} needs a link profile: link = \"NAME\", one of the [links.NAME] tables"
            ));
        };
        match self.profiles.get(name) {
            Some(p) => Ok((name.to_string(), p.clone())),
            None => {
                let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
                Err(format!(
                    "{what}: no link profile '{name}'; add [links.{name}] or use one of: {}",
                    if known.is_empty() {
                        "(none declared)".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            }
        }
    }

    fn link(
        &mut self,
        a: &str,
        b: &str,
        ab: Option<&str>,
        ba: Option<&str>,
        what: &str,
    ) -> Result<(), String> {
        if a == b {
            return Err(format!("{what}: a link from '{a}' to itself"));
        }
        self.node(a)?;
        self.node(b)?;
        let what = format!("{what} {a} — {b}");
        let ab = self.profile(ab, &what)?;
        let ba = self.profile(ba, &what)?;
        self.links.push(LinkDecl {
            a: a.to_string(),
            b: b.to_string(),
            ab,
            ba,
        });
        Ok(())
    }

    fn leaves(&mut self, center: &str, leaves: &[RawLeaf]) -> Result<(), String> {
        for l in leaves {
            let names: Vec<String> = match (&l.node, &l.prefix, l.count) {
                (Some(n), None, None) => vec![n.clone()],
                (None, Some(p), Some(c)) if c >= 1 && self.nodes.len().saturating_add(c) <= MAX_TREE_NODES => {
                    (1..=c).map(|i| format!("{p}{i}")).collect()
                }
                (None, Some(p), Some(c)) => {
                    return Err(format!(
                        "leaves '{p}': count = {c} must be 1 to {MAX_TREE_NODES} (nodes in all)"
                    ))
                }
                _ => return Err(
                    "a leaf is { node = \"NAME\", link = ... }, or { prefix = \"r\", count = 45, link = ... } for r1..r45".into(),
                ),
            };
            let both = l.link.as_deref();
            for n in names {
                self.link(
                    center,
                    &n,
                    l.down.as_deref().or(both),
                    l.up.as_deref().or(both),
                    "leaf",
                )?;
            }
        }
        Ok(())
    }

    fn shape(&mut self, t: &RawTopology) -> Result<(), String> {
        let need = |v: Option<&str>, key: &str| {
            v.map(str::to_string)
                .ok_or_else(|| format!("a {} topology needs '{key}'", t.shape))
        };
        match t.shape.as_str() {
            "star" => {
                let center = need(t.center.as_deref(), "center")?;
                self.node(&center)?;
                let leaves = t.leaves.as_deref().unwrap_or_default();
                if leaves.is_empty() {
                    return Err("a star needs leaves = [{ node = \"NAME\", link = \"PROFILE\" }, ...]".into());
                }
                self.leaves(&center, leaves)
            }
            "dumbbell" => {
                let [l, r] = t.routers.clone().unwrap_or(["left".into(), "right".into()]);
                let bn = need(t.bottleneck.as_deref(), "bottleneck")?;
                self.link(&l, &r, Some(&bn), Some(&bn), "bottleneck")?;
                self.leaves(&l, t.left.as_deref().unwrap_or_default())?;
                self.leaves(&r, t.right.as_deref().unwrap_or_default())
            }
            "chain" => {
                let nodes = t.nodes.as_deref().unwrap_or_default();
                if nodes.len() < 2 {
                    return Err("a chain needs nodes = [\"a\", \"b\", ...], at least two".into());
                }
                let hops = nodes.len() - 1;
                for i in 0..hops {
                    let p = match (&t.links, &t.link) {
                        (Some(ls), _) if ls.len() == hops => Some(ls[i].as_str()),
                        (Some(ls), _) => {
                            return Err(format!("a chain of {} nodes has {hops} hops, but links has {}", nodes.len(), ls.len()))
                        }
                        (None, l) => l.as_deref(),
                    };
                    self.link(&nodes[i], &nodes[i + 1], p, p, "hop")?;
                }
                Ok(())
            }
            "tree" => self.tree(t),
            other => Err(format!(
                "shape = \"{other}\" is not known; use star, dumbbell, chain or tree (or [[link]] tables alone)"
            )),
        }
    }

    fn tree(&mut self, t: &RawTopology) -> Result<(), String> {
        let root = t.root.clone().ok_or("a tree topology needs 'root'")?;
        self.node(&root)?;
        let levels = t.levels.as_deref().unwrap_or_default();
        if levels.is_empty() {
            return Err(
                "a tree needs levels = [{ count = N, link = \"PROFILE\", prefix = \"NAME\" }, ...]"
                    .into(),
            );
        }
        let mut parents = vec![root];
        for level in levels {
            let total = parents.len().saturating_mul(level.count);
            if level.count == 0 || self.nodes.len().saturating_add(total) > MAX_TREE_NODES {
                return Err(format!(
                    "tree level '{}' would make {total} nodes; each level needs count ≥ 1 and the tree at most {MAX_TREE_NODES} nodes",
                    level.prefix
                ));
            }
            let mut next = Vec::with_capacity(total);
            for p in &parents {
                for _ in 0..level.count {
                    let name = format!("{}{}", level.prefix, next.len() + 1);
                    if self.index.contains_key(&name) {
                        return Err(format!("tree level '{}' makes '{name}', which already exists; pick another prefix", level.prefix));
                    }
                    self.link(p, &name, Some(&level.link), Some(&level.link), "tree level")?;
                    next.push(name);
                }
            }
            parents = next;
        }
        Ok(())
    }
}
