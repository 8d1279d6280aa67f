//! Checks on inherited file descriptors handed to a VMM.

use std::collections::BTreeSet;

use super::nic::Nic;
use super::RenderError;

/// One list of TAP queue fds per NIC, one fd per queue of its TAP.
pub(crate) fn check_tap_fd_lists(nics: &[Nic<'_>], taps: &[Vec<i32>]) -> Result<(), RenderError> {
    if taps.len() != nics.len() {
        return Err(RenderError::FdListCount {
            given: taps.len(),
            attached: nics.len(),
        });
    }
    for (nic, fds) in nics.iter().zip(taps) {
        if fds.len() != nic.tap.queues as usize {
            return Err(RenderError::QueueFdCount {
                nic: nic.id.clone(),
                tap: nic.tap.name.clone(),
                queues: nic.tap.queues,
                fds: fds.len(),
            });
        }
    }
    Ok(())
}

/// Every fd is above stdio and appears once.
pub(crate) fn check_usable_and_distinct<'a>(
    fds: impl IntoIterator<Item = &'a i32>,
) -> Result<(), RenderError> {
    let mut seen = BTreeSet::new();
    for &fd in fds {
        if fd <= 2 {
            return Err(RenderError::ReservedFd { fd });
        }
        if !seen.insert(fd) {
            return Err(RenderError::DuplicateFd { fd });
        }
    }
    Ok(())
}

/// The fds joined by `separator`: `3:4` for QEMU, `3,4` for Cloud Hypervisor.
pub(crate) fn join_fds(fds: &[i32], separator: &str) -> String {
    fds.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}
