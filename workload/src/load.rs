//! `sluice load`: open-loop load from a scenario, measured from the
//! intended send time. Pure parts (the schedule) first, then the drivers.

mod schedule;

pub use schedule::{
    mean_gap_s, Intended, Plan, Process, Schedule, ScheduleError, Segment, Shard, MAX_ARRIVALS,
};
