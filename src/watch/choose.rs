//! Which VMM client the watcher drives, from its options (above the
//! clients: it imports them, they never import it).

use super::ch_api::CloudHypervisorApi;
use super::options::WatchOptions;
use super::qmp::QmpVmm;
use super::vmm::VmmClient;
use crate::error::{Error, Result};

/// The VMM `opts` names, if one (naming both is an error).
pub(super) fn choose(opts: &WatchOptions) -> Result<Option<Box<dyn VmmClient>>> {
    match (&opts.qmp, &opts.cloud_hypervisor_api) {
        (Some(_), Some(_)) => Err(Error::Invalid(
            "watch: give --qmp or --cloud-hypervisor-api, not both".into(),
        )),
        (Some(q), None) => Ok(Some(Box::new(QmpVmm::new(q, opts.vmm_uid)))),
        (None, Some(c)) => Ok(Some(Box::new(CloudHypervisorApi::new(c, opts.vmm_uid)))),
        (None, None) => Ok(None),
    }
}
