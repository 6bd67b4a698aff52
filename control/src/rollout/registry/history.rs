//! Finished rollouts (promoted, rolled back, aborted). A finished rollout
//! leaves the live config's `rollouts:`, so that its route is free for the
//! next one, and is kept here so that the API still shows it, with its
//! final state and its transitions, until it is deleted. Past [`KEPT`],
//! the oldest finished one goes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::super::controller::Cell;

/// Finished rollouts kept; a sluice that runs one a minute keeps four hours.
pub(super) const KEPT: usize = 256;

#[derive(Default)]
pub(super) struct History {
    cells: BTreeMap<String, Arc<Cell>>,
    /// Names, oldest finished first.
    order: VecDeque<String>,
}

impl History {
    /// Keeps `cell`; returns the names that went to make room.
    pub(super) fn insert(&mut self, cell: Arc<Cell>) -> Vec<String> {
        let name = cell.name.clone();
        if self.cells.insert(name.clone(), cell).is_some() {
            self.order.retain(|n| *n != name);
        }
        self.order.push_back(name);
        let mut gone = Vec::new();
        while self.order.len() > KEPT {
            if let Some(oldest) = self.order.pop_front() {
                self.cells.remove(&oldest);
                gone.push(oldest);
            }
        }
        gone
    }

    pub(super) fn get(&self, name: &str) -> Option<&Arc<Cell>> {
        self.cells.get(name)
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<Arc<Cell>> {
        self.order.retain(|n| n != name);
        self.cells.remove(name)
    }

    pub(super) fn cells(&self) -> impl Iterator<Item = &Arc<Cell>> {
        self.cells.values()
    }
}
