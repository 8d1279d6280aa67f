//! STATUS (CNI 1.1): can this node attach in the configured mode?
//!
//! containerd runs STATUS on every CRI status poll and turns an error into
//! NetworkReady=false, so the probe asks only for what the mode needs
//! ([`podtap::probe::mode`]): macvtap needs no `/dev/net/tun`, and only tc
//! mode needs the u32 filter and mirred action. Each feature is made, not
//! guessed from module lists, in a scratch network namespace that dies
//! with the probe.

use super::config::NetConf;
use super::{code, CniError};

pub fn probe(conf: &NetConf) -> Result<(), CniError> {
    podtap::probe::mode(conf.node_mode()?)
        .map_err(|e| CniError::new(code::NOT_AVAILABLE, format!("plugin not available: {e}")))
}
