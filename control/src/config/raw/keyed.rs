//! Maps keyed by a name table whose values' shape depends on the key:
//! `gates:` (a duration, a percent, a ratio or a count by gate) and an
//! experiment's `action:` (one body per action). The key is read as text
//! and looked up in its table inside the value's own path, so that an
//! unknown key reads `gates.ttft_p50: unknown gate ...` and lists the
//! valid names from the table.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::Deserializer;
use sluice_filters::UnknownName;

/// A value read according to its key.
pub(crate) trait Keyed: Sized {
    type Key: Copy;
    /// What the map holds, for serde's "expected ..." messages.
    const EXPECTING: &'static str;

    fn key(text: &str) -> Result<Self::Key, UnknownName>;

    fn read<'de, D: Deserializer<'de>>(key: Self::Key, d: D) -> Result<Self, D::Error>;
}

/// Every entry of the map, in the order written.
pub(crate) fn read<'de, D, V>(d: D) -> Result<Vec<(V::Key, V)>, D::Error>
where
    D: Deserializer<'de>,
    V: Keyed,
{
    d.deserialize_map(EntriesVisitor(PhantomData))
}

struct EntriesVisitor<V>(PhantomData<V>);

impl<'de, V: Keyed> Visitor<'de> for EntriesVisitor<V> {
    type Value = Vec<(V::Key, V)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(V::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(text) = map.next_key::<String>()? {
            out.push(map.next_value_seed(Entry::<V>(&text, PhantomData))?);
        }
        Ok(out)
    }
}

/// The value of the entry whose key `text` was just read from `map`, read
/// by its key: for a map that holds other keys besides the table's.
pub(crate) fn next_value<'de, A, V>(map: &mut A, text: &str) -> Result<(V::Key, V), A::Error>
where
    A: MapAccess<'de>,
    V: Keyed,
{
    map.next_value_seed(Entry::<V>(text, PhantomData))
}

struct Entry<'k, V>(&'k str, PhantomData<V>);

impl<'de, V: Keyed> DeserializeSeed<'de> for Entry<'_, V> {
    type Value = (V::Key, V);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let key = V::key(self.0).map_err(de::Error::custom)?;
        Ok((key, V::read(key, d)?))
    }
}
