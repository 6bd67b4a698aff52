//! Validation of `load:`: the address ranges whose `x-sluice-load` mark is
//! believed.

use sluice_filters::Cidr;

use super::super::raw::RawLoad;
use super::super::typed::LoadConfig;
use super::Errors;

pub(super) fn load(raw: Option<&RawLoad>, errs: &mut Errors) -> LoadConfig {
    let Some(peers) = raw.and_then(|r| r.trusted_peers.as_ref()) else {
        return LoadConfig::default();
    };
    let trusted_peers = peers
        .iter()
        .enumerate()
        .filter_map(|(i, text)| match Cidr::parse(text) {
            Ok(c) => Some(c),
            Err(e) => {
                errs.push(format!("load.trusted_peers[{i}]"), e);
                None
            }
        })
        .collect();
    LoadConfig { trusted_peers }
}
