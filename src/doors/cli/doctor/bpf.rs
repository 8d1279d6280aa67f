//! The tcx probe: tcx (Linux 6.6+) has no netlink interface, so the probe
//! loads a two-instruction `BPF_PROG_TYPE_SCHED_CLS` program with bpf(2)
//! and attaches it with `BPF_LINK_CREATE` at `BPF_TCX_INGRESS` of a link in
//! the throwaway netns. Both fds close on return, which detaches and frees it.

use crate::error::KernelError;
use crate::kernel::bpf::{bpf, load_sched_cls, put, ATTR_SIZE};

const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_TCX_INGRESS: u32 = 46;

/// Load a program and attach it at tcx ingress of `ifindex`.
pub fn tcx_probe(ifindex: u32) -> Result<(), KernelError> {
    // mov64 r0, 0 (TC_ACT_OK); exit.
    let prog = load_sched_cls(
        &[[0xb7, 0, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]],
        b"",
    )?;
    let mut attr = [0u8; ATTR_SIZE];
    let prog_fd = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&prog)).unwrap_or(u32::MAX);
    put(&mut attr, 0, &prog_fd.to_ne_bytes());
    put(&mut attr, 4, &ifindex.to_ne_bytes());
    put(&mut attr, 8, &BPF_TCX_INGRESS.to_ne_bytes());
    let _link = bpf(BPF_LINK_CREATE, &mut attr)?;
    Ok(())
}
