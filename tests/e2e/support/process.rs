//! A child process a test started (a sluice, a model server, a store, a collector): killed
//! and reaped when its handle drops, so that a failing test leaves nothing running.

use std::ops::{Deref, DerefMut};
use std::process::Child;

pub(crate) struct Process(Child);

impl Process {
    pub(crate) fn new(child: Child) -> Self {
        Self(child)
    }
}

impl Deref for Process {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
