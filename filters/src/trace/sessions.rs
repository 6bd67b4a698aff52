//! Think time within a session: from the end of the previous answer to the
//! arrival of the next request, as the recorder sees requests finish.

use std::collections::HashMap;
use std::time::Duration;

/// The last request of each recent session. Bounded: two generations of at
/// most `capacity / 2` sessions each; a session unseen for a whole
/// generation is forgotten (its next request has no think time).
#[derive(Debug)]
pub struct ThinkTimes {
    current: HashMap<String, Last>,
    previous: HashMap<String, Last>,
    generation: usize,
}

#[derive(Clone, Copy, Debug)]
struct Last {
    arrival: Duration,
    end: Duration,
}

impl ThinkTimes {
    pub fn new(capacity: usize) -> ThinkTimes {
        ThinkTimes {
            current: HashMap::new(),
            previous: HashMap::new(),
            generation: (capacity / 2).max(1),
        }
    }

    /// A finished request of `session` that arrived at `arrival` and ended at
    /// `end` (both from the start of the recording). Returns its think time:
    /// `None` for the session's first request, or for one that arrived before
    /// the latest already seen (lines come in the order answers end); zero
    /// when it was sent before the previous answer ended.
    pub fn observe(&mut self, session: &str, arrival: Duration, end: Duration) -> Option<Duration> {
        let last = self
            .current
            .get(session)
            .or_else(|| self.previous.get(session))
            .copied();
        if let Some(last) = last {
            if arrival < last.arrival {
                return None;
            }
        }
        if self.current.len() >= self.generation && !self.current.contains_key(session) {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current
            .insert(session.to_owned(), Last { arrival, end });
        last.map(|last| arrival.saturating_sub(last.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn think_time_is_from_the_previous_end_to_this_arrival() {
        let mut t = ThinkTimes::new(16);
        assert_eq!(t.observe("a", ms(0), ms(100)), None);
        assert_eq!(t.observe("b", ms(10), ms(50)), None);
        assert_eq!(t.observe("a", ms(1100), ms(1200)), Some(ms(1000)));
        // Sent while the previous answer was still streaming.
        assert_eq!(t.observe("a", ms(1150), ms(1300)), Some(ms(0)));
        // Logged after a later request of the same session: no think time.
        assert_eq!(t.observe("a", ms(1120), ms(1400)), None);
        assert_eq!(t.observe("b", ms(60), ms(70)), Some(ms(10)));
    }

    #[test]
    fn bounded() {
        let mut t = ThinkTimes::new(4);
        for s in ["a", "b", "c", "d", "e"] {
            t.observe(s, ms(0), ms(1));
        }
        // Two generations of two: `a` and `b` went with the first one.
        assert!(t.current.len() + t.previous.len() <= 4);
        assert_eq!(t.observe("a", ms(5), ms(6)), None);
        assert_eq!(t.observe("e", ms(5), ms(6)), Some(ms(4)));
    }
}
