//! The lineage DAG over whatever artefacts were read (files, the control
//! API), and its three renderings: an indented tree for people, JSON nodes
//! and edges, Graphviz. Edges come from each artefact's `parents` alone, so
//! any new kind (a feedback scenario below a rollout event) chains without
//! a change here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{json, Value};
use sluice_filters::{Artifact, ContentId};

/// Every artefact known, by id, with the reverse edges.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: BTreeMap<ContentId, Artifact>,
    children: BTreeMap<ContentId, BTreeSet<ContentId>>,
}

/// A part of the graph to show: one artefact with its ancestors and
/// descendants, or all of it.
#[derive(Debug)]
pub struct Walk<'a> {
    graph: &'a Graph,
    root: Option<ContentId>,
    ids: BTreeSet<ContentId>,
}

impl Graph {
    /// The graph of `artifacts`; of two with one id (a file and the live
    /// API), the first is kept: their inputs are the same by construction.
    pub fn new(artifacts: impl IntoIterator<Item = Artifact>) -> Graph {
        let mut graph = Graph::default();
        for a in artifacts {
            if graph.nodes.contains_key(&a.id) {
                continue;
            }
            for p in &a.parents {
                graph
                    .children
                    .entry(p.clone())
                    .or_default()
                    .insert(a.id.clone());
            }
            graph.nodes.insert(a.id.clone(), a);
        }
        graph
    }

    pub fn get(&self, id: &ContentId) -> Option<&Artifact> {
        self.nodes.get(id)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `id` with everything it came from and everything made from it;
    /// `None` when no artefact has that id.
    pub fn walk(&self, id: &ContentId) -> Option<Walk<'_>> {
        self.nodes.get(id)?;
        let mut ids = BTreeSet::new();
        self.collect(id, &mut ids, |a| {
            self.nodes
                .get(a)
                .map(|n| n.parents.clone())
                .unwrap_or_default()
        });
        self.collect(id, &mut ids, |a| {
            self.children
                .get(a)
                .map(|c| c.iter().cloned().collect())
                .unwrap_or_default()
        });
        Some(Walk {
            graph: self,
            root: Some(id.clone()),
            ids,
        })
    }

    /// The whole graph.
    pub fn all(&self) -> Walk<'_> {
        Walk {
            graph: self,
            root: None,
            ids: self.nodes.keys().cloned().collect(),
        }
    }

    fn collect(
        &self,
        from: &ContentId,
        seen: &mut BTreeSet<ContentId>,
        next: impl Fn(&ContentId) -> Vec<ContentId>,
    ) {
        let mut stack = vec![from.clone()];
        while let Some(id) = stack.pop() {
            for n in next(&id) {
                if seen.insert(n.clone()) {
                    stack.push(n);
                }
            }
        }
        seen.insert(from.clone());
    }

    /// Ids in a stable order for people: by kind, then a rollout event's
    /// `seq`, then label and id.
    fn ordered<'a>(&self, ids: impl Iterator<Item = &'a ContentId>) -> Vec<&'a ContentId> {
        let mut ids: Vec<&ContentId> = ids.collect();
        ids.sort_by_key(|id| match self.nodes.get(*id) {
            Some(a) => (
                0,
                Some(a.kind),
                a.inputs.get("seq").and_then(Value::as_u64),
                a.label.clone(),
                (*id).clone(),
            ),
            None => (1, None, None, String::new(), (*id).clone()),
        });
        ids
    }

    fn line(&self, id: &ContentId) -> String {
        match self.nodes.get(id) {
            Some(a) => format!("{} {}  {}", a.kind.name(), a.id, a.label),
            None => format!("? {id}  (no artefact read)"),
        }
    }
}

impl Walk<'_> {
    /// An indented tree: with a root, what it was made from (its parents,
    /// theirs below them) and what was made from it; without, every
    /// artefact below the ones without a known parent. An artefact met a
    /// second time is named with `(above)` and not expanded again.
    pub fn tree(&self) -> String {
        let g = self.graph;
        let mut out = String::new();
        match &self.root {
            Some(root) => {
                let _ = writeln!(out, "{}", g.line(root));
                out.push_str("made from:\n");
                let mut shown = BTreeSet::new();
                let parents = |id: &ContentId| -> Vec<ContentId> {
                    g.nodes
                        .get(id)
                        .map(|a| a.parents.clone())
                        .unwrap_or_default()
                };
                self.branch(root, 1, &parents, &mut shown, &mut out, "  (nothing)\n");
                out.push_str("made into:\n");
                let mut shown = BTreeSet::new();
                let children = |id: &ContentId| self.children(id);
                self.branch(root, 1, &children, &mut shown, &mut out, "  (nothing)\n");
            }
            None => {
                let mut shown = BTreeSet::new();
                let roots = self.ids.iter().filter(|id| {
                    g.nodes
                        .get(*id)
                        .is_some_and(|a| a.parents.iter().all(|p| !g.nodes.contains_key(p)))
                });
                let children = |id: &ContentId| self.children(id);
                for root in g.ordered(roots) {
                    let _ = writeln!(out, "{}", g.line(root));
                    shown.insert(root.clone());
                    self.branch(root, 1, &children, &mut shown, &mut out, "");
                }
            }
        }
        out
    }

    fn children(&self, id: &ContentId) -> Vec<ContentId> {
        self.graph
            .children
            .get(id)
            .map(|c| {
                c.iter()
                    .filter(|c| self.ids.contains(*c))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    fn branch(
        &self,
        id: &ContentId,
        depth: usize,
        next: &dyn Fn(&ContentId) -> Vec<ContentId>,
        shown: &mut BTreeSet<ContentId>,
        out: &mut String,
        none: &str,
    ) {
        let below = next(id);
        if below.is_empty() && depth == 1 {
            out.push_str(none);
        }
        for n in self.graph.ordered(below.iter()) {
            let indent = "  ".repeat(depth);
            if shown.insert(n.clone()) {
                let _ = writeln!(out, "{indent}{}", self.graph.line(n));
                self.branch(n, depth + 1, next, shown, out, none);
            } else {
                let _ = writeln!(out, "{indent}{} (above)", self.graph.line(n));
            }
        }
    }

    /// The edges among the walk's artefacts, parent first; a parent no
    /// artefact was read for is kept (and listed in `missing`).
    fn edges(&self) -> (Vec<(ContentId, ContentId)>, BTreeSet<ContentId>) {
        let mut edges = Vec::new();
        let mut missing = BTreeSet::new();
        for id in &self.ids {
            let Some(a) = self.graph.nodes.get(id) else {
                continue;
            };
            for p in &a.parents {
                if !self.graph.nodes.contains_key(p) {
                    missing.insert(p.clone());
                } else if !self.ids.contains(p) {
                    continue;
                }
                edges.push((p.clone(), id.clone()));
            }
        }
        edges.sort();
        (edges, missing)
    }

    /// `{"root", "nodes": [artefacts], "edges": [{"from", "to"}], "missing"}`.
    pub fn json(&self) -> Value {
        let nodes: Vec<&Artifact> = self
            .ids
            .iter()
            .filter_map(|id| self.graph.nodes.get(id))
            .collect();
        let (edges, missing) = self.edges();
        let edges: Vec<Value> = edges
            .iter()
            .map(|(from, to)| json!({"from": from, "to": to}))
            .collect();
        json!({
            "root": self.root,
            "nodes": nodes,
            "edges": edges,
            "missing": missing,
        })
    }

    /// A Graphviz digraph, parents to children, left to right.
    pub fn dot(&self) -> String {
        let mut out = String::from("digraph lineage {\n  rankdir=LR;\n  node [shape=box];\n");
        for id in &self.ids {
            if let Some(a) = self.graph.nodes.get(id) {
                let label = format!("{}\\n{}\\n{}", a.kind.name(), quote(&a.label), a.id);
                let bold = match self.root.as_ref() == Some(id) {
                    true => ", style=bold",
                    false => "",
                };
                let _ = writeln!(out, "  \"{id}\" [label=\"{label}\"{bold}];");
            }
        }
        let (edges, missing) = self.edges();
        for id in &missing {
            let _ = writeln!(out, "  \"{id}\" [label=\"?\\n{id}\", style=dashed];");
        }
        for (from, to) in edges {
            let _ = writeln!(out, "  \"{from}\" -> \"{to}\";");
        }
        out.push_str("}\n");
        out
    }
}

/// A label inside a DOT string.
fn quote(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
