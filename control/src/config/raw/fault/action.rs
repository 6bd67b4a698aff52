//! An experiment's `action:` as written: one key of [`ActionName`]'s
//! table, with the body that action takes. Durations stay strings for
//! validation.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_filters::{ActionName, UnknownName};

use super::super::keyed::{self, Keyed};

/// Every action key written, in order; validation wants exactly one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawFaultAction(pub Vec<RawActionBody>);

/// One action with its body, by [`ActionName`].
#[derive(Clone, Debug, PartialEq)]
pub enum RawActionBody {
    Delay(RawDelay),
    Abort(RawAbort),
    Reset(RawEmpty),
    Close(RawEmpty),
    FirstTokenDelay(RawDelay),
    TokenDelay(RawDelay),
    Stall(RawStall),
    Truncate(RawTruncate),
    DropUsage(RawEmpty),
    DropDone(RawEmpty),
    Corrupt(RawAfterChunks),
    /// On an HTTP route: the answer's pace; on a tcp listener: a toxic.
    Bandwidth(RawBandwidth),
    Latency(RawLatency),
    Slicer(RawSlicer),
    SlowClose(RawDelay),
    Timeout(RawTimeout),
    ResetPeer(RawTimeout),
    LimitData(RawLimitData),
}

impl RawActionBody {
    pub fn name(&self) -> ActionName {
        match self {
            RawActionBody::Delay(_) => ActionName::Delay,
            RawActionBody::Abort(_) => ActionName::Abort,
            RawActionBody::Reset(_) => ActionName::Reset,
            RawActionBody::Close(_) => ActionName::Close,
            RawActionBody::FirstTokenDelay(_) => ActionName::FirstTokenDelay,
            RawActionBody::TokenDelay(_) => ActionName::TokenDelay,
            RawActionBody::Stall(_) => ActionName::Stall,
            RawActionBody::Truncate(_) => ActionName::Truncate,
            RawActionBody::DropUsage(_) => ActionName::DropUsage,
            RawActionBody::DropDone(_) => ActionName::DropDone,
            RawActionBody::Corrupt(_) => ActionName::Corrupt,
            RawActionBody::Bandwidth(_) => ActionName::Bandwidth,
            RawActionBody::Latency(_) => ActionName::Latency,
            RawActionBody::Slicer(_) => ActionName::Slicer,
            RawActionBody::SlowClose(_) => ActionName::SlowClose,
            RawActionBody::Timeout(_) => ActionName::Timeout,
            RawActionBody::ResetPeer(_) => ActionName::ResetPeer,
            RawActionBody::LimitData(_) => ActionName::LimitData,
        }
    }
}

impl Keyed for RawActionBody {
    type Key = ActionName;
    const EXPECTING: &'static str = "a map of one action to its fields";

    fn key(text: &str) -> Result<ActionName, UnknownName> {
        ActionName::parse(text)
    }

    fn read<'de, D: Deserializer<'de>>(name: ActionName, d: D) -> Result<Self, D::Error> {
        Ok(match name {
            ActionName::Delay => RawActionBody::Delay(Deserialize::deserialize(d)?),
            ActionName::Abort => RawActionBody::Abort(Deserialize::deserialize(d)?),
            ActionName::Reset => RawActionBody::Reset(Deserialize::deserialize(d)?),
            ActionName::Close => RawActionBody::Close(Deserialize::deserialize(d)?),
            ActionName::FirstTokenDelay => {
                RawActionBody::FirstTokenDelay(Deserialize::deserialize(d)?)
            }
            ActionName::TokenDelay => RawActionBody::TokenDelay(Deserialize::deserialize(d)?),
            ActionName::Stall => RawActionBody::Stall(Deserialize::deserialize(d)?),
            ActionName::Truncate => RawActionBody::Truncate(Deserialize::deserialize(d)?),
            ActionName::DropUsage => RawActionBody::DropUsage(Deserialize::deserialize(d)?),
            ActionName::DropDone => RawActionBody::DropDone(Deserialize::deserialize(d)?),
            ActionName::Corrupt => RawActionBody::Corrupt(Deserialize::deserialize(d)?),
            ActionName::Bandwidth => RawActionBody::Bandwidth(Deserialize::deserialize(d)?),
            ActionName::Latency => RawActionBody::Latency(Deserialize::deserialize(d)?),
            ActionName::Slicer => RawActionBody::Slicer(Deserialize::deserialize(d)?),
            ActionName::SlowClose => RawActionBody::SlowClose(Deserialize::deserialize(d)?),
            ActionName::Timeout => RawActionBody::Timeout(Deserialize::deserialize(d)?),
            ActionName::ResetPeer => RawActionBody::ResetPeer(Deserialize::deserialize(d)?),
            ActionName::LimitData => RawActionBody::LimitData(Deserialize::deserialize(d)?),
        })
    }
}

impl<'de> Deserialize<'de> for RawFaultAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = keyed::read::<D, RawActionBody>(d)?;
        Ok(RawFaultAction(
            entries.into_iter().map(|(_, b)| b).collect(),
        ))
    }
}

impl Serialize for RawFaultAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|b| (b.name(), b)))
    }
}

impl Serialize for RawActionBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RawActionBody::Delay(b)
            | RawActionBody::FirstTokenDelay(b)
            | RawActionBody::TokenDelay(b)
            | RawActionBody::SlowClose(b) => b.serialize(s),
            RawActionBody::Abort(b) => b.serialize(s),
            RawActionBody::Reset(b)
            | RawActionBody::Close(b)
            | RawActionBody::DropUsage(b)
            | RawActionBody::DropDone(b) => b.serialize(s),
            RawActionBody::Stall(b) => b.serialize(s),
            RawActionBody::Truncate(b) => b.serialize(s),
            RawActionBody::Corrupt(b) => b.serialize(s),
            RawActionBody::Bandwidth(b) => b.serialize(s),
            RawActionBody::Latency(b) => b.serialize(s),
            RawActionBody::Slicer(b) => b.serialize(s),
            RawActionBody::Timeout(b) | RawActionBody::ResetPeer(b) => b.serialize(s),
            RawActionBody::LimitData(b) => b.serialize(s),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmpty {}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawDistribution {
    Uniform,
    Normal,
    Lognormal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawTruncateMode {
    Clean,
    Abrupt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawDirection {
    Upstream,
    Downstream,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDelay {
    pub delay: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// `delay` only; uniform by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<RawDistribution>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAbort {
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawStall {
    #[serde(default)]
    pub after_chunks: u32,
    pub duration: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTruncate {
    #[serde(default)]
    pub after_chunks: u32,
    pub mode: RawTruncateMode,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAfterChunks {
    #[serde(default)]
    pub after_chunks: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawBandwidth {
    pub bytes_per_sec: u64,
    /// tcp only; default downstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<RawDirection>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLatency {
    pub latency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<RawDirection>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlicer {
    pub average_size: usize,
    #[serde(default)]
    pub size_variation: usize,
    pub delay: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<RawDirection>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeout {
    pub timeout: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimitData {
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<RawDirection>,
}
