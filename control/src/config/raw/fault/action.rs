//! An experiment's `action:` as written: one key of [`ActionName`]'s
//! table, with the body that action takes. Durations stay strings for
//! validation.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_with::skip_serializing_none;
use sluice_filters::{ActionName, UnknownName};

use super::super::keyed::{self, Keyed};

/// Every action key written, in order; validation wants exactly one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawFaultAction(pub Vec<RawActionBody>);

/// Declares [`RawActionBody`] from one list, a variant per [`ActionName`]
/// (same identifier) with the body it takes: its name, how it is read by
/// its key and how it is written all follow from the list.
macro_rules! action_bodies {
    ($($(#[$meta:meta])* $variant:ident($body:ty)),+ $(,)?) => {
        /// One action with its body, by [`ActionName`].
        #[derive(Clone, Debug, PartialEq)]
        pub enum RawActionBody {
            $($(#[$meta])* $variant($body)),+
        }

        impl RawActionBody {
            pub fn name(&self) -> ActionName {
                match self {
                    $(RawActionBody::$variant(_) => ActionName::$variant),+
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
                    $(ActionName::$variant => RawActionBody::$variant(Deserialize::deserialize(d)?)),+
                })
            }
        }

        impl Serialize for RawActionBody {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(RawActionBody::$variant(body) => body.serialize(s)),+
                }
            }
        }
    };
}

action_bodies! {
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

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDelay {
    pub delay: String,
    pub jitter: Option<String>,
    /// `delay` only; uniform by default.
    pub distribution: Option<RawDistribution>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAbort {
    /// The HTTP status; on gRPC calls too when `grpc_status` is absent.
    pub status: Option<u16>,
    pub body: Option<String>,
    /// A gRPC status (0..=16) for gRPC calls.
    pub grpc_status: Option<u32>,
    /// Its `grpc-message`.
    pub message: Option<String>,
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

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawBandwidth {
    pub bytes_per_sec: u64,
    /// tcp only; default downstream.
    pub direction: Option<RawDirection>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLatency {
    pub latency: String,
    pub jitter: Option<String>,
    pub direction: Option<RawDirection>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlicer {
    pub average_size: usize,
    #[serde(default)]
    pub size_variation: usize,
    pub delay: String,
    pub direction: Option<RawDirection>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeout {
    pub timeout: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimitData {
    pub bytes: u64,
    pub direction: Option<RawDirection>,
}
