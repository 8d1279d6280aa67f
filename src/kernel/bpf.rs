//! bpf(2): podtap's one BPF program, the redirect tc mode attaches with
//! cls_bpf (direct action) in both directions between a pod interface and
//! its TAP.
//!
//! The program is four instructions and the same for every filter:
//!
//! ```text
//! r1 = *(u32 *)(r1 + 72)   ; __sk_buff.tc_classid: the filter's classid
//! r2 = 0                   ; flags: to the target's egress
//! call bpf_redirect
//! exit                     ; TC_ACT_REDIRECT, the verdict in direct-action mode
//! ```
//!
//! cls_bpf copies a filter's classid into the packet's `tc_classid` before
//! it runs the program, so each filter names its target as its classid, a
//! value the kernel keeps and dumps. One load serves every filter of an
//! attach, and a dump proves both what runs (the program's tag, a hash the
//! kernel computes over the instructions) and where it sends packets (the
//! classid). `tc_classid` is 16 bits wide: a link whose ifindex is above
//! 65535 keeps u32 + mirred.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::KernelError;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// Large enough for every field podtap sets; the kernel accepts a longer
/// `union bpf_attr` as long as the bytes it does not know are zero.
pub const ATTR_SIZE: usize = 128;

/// The filter name podtap gives its redirects (`TCA_BPF_NAME`), for people
/// reading `tc filter show`; recognition goes by tag and classid.
pub const FILTER_NAME: &str = "podtap_redirect";
/// The program's own name (`bpftool prog` shows it).
const PROG_NAME: &[u8] = b"podtap_redir";
/// The highest target a redirect program can name (`tc_classid` is a u16).
pub const MAX_TARGET: u32 = 0xFFFF;

/// The instructions, as the kernel takes them (`struct bpf_insn`, little
/// endian: code, dst | src << 4, off, imm).
const INSNS: [[u8; 8]; 4] = [
    // BPF_LDX | BPF_MEM | BPF_W, r1 = *(u32 *)(r1 + 72)
    [0x61, 0x11, 72, 0, 0, 0, 0, 0],
    // BPF_ALU64 | BPF_MOV | BPF_K, r2 = 0
    [0xb7, 0x02, 0, 0, 0, 0, 0, 0],
    // BPF_JMP | BPF_CALL, imm = BPF_FUNC_redirect (23)
    [0x85, 0, 0, 0, 23, 0, 0, 0],
    // BPF_JMP | BPF_EXIT
    [0x95, 0, 0, 0, 0, 0, 0, 0],
];

/// The program's tag as kernels compute it: the first 8 bytes of the
/// SHA-256 (Linux 6.18 and later) or SHA-1 (earlier) of [`INSNS`]. A loaded
/// program whose tag is neither is not taken (and not recognised in a dump).
pub const REDIRECT_TAGS: [[u8; 8]; 2] = [
    [0x35, 0x1a, 0x16, 0x12, 0xfd, 0x39, 0xee, 0x2f],
    [0xfd, 0x42, 0xed, 0xd0, 0x2e, 0x5d, 0xe6, 0x48],
];

/// A loaded redirect program; cls_bpf filters made with its fd keep it
/// alive after this closes.
#[derive(Debug)]
pub struct RedirectProgram {
    fd: OwnedFd,
    jited: bool,
}

impl RedirectProgram {
    /// Load the program and prove its tag is one of [`REDIRECT_TAGS`].
    pub fn load() -> Result<Self, KernelError> {
        let fd = load_sched_cls(&INSNS, PROG_NAME)?;
        let (tag, jited) = prog_info(&fd)?;
        if !REDIRECT_TAGS.contains(&tag) {
            return Err(KernelError::Netlink(format!(
                "bpf: the redirect program loaded with tag {}, not a known one",
                hex(&tag)
            )));
        }
        Ok(RedirectProgram { fd, jited })
    }

    /// Whether the kernel compiled it to native code (`net.core.bpf_jit_enable`);
    /// interpreted, it costs more per packet than u32 + mirred.
    pub fn jited(&self) -> bool {
        self.jited
    }

    /// The fd a cls_bpf filter request names (`TCA_BPF_FD`).
    pub fn raw_fd(&self) -> u32 {
        u32::try_from(self.fd.as_raw_fd()).unwrap_or(u32::MAX)
    }
}

/// The tag the kernel computed for the program behind `fd`, and whether
/// it was JIT-compiled.
fn prog_info(fd: &OwnedFd) -> Result<([u8; 8], bool), KernelError> {
    // struct bpf_prog_info starts: type (u32), id (u32), tag (8 bytes),
    // jited_prog_len (u32).
    let mut info = [0u8; 20];
    let mut attr = [0u8; ATTR_SIZE];
    let raw = u32::try_from(fd.as_raw_fd()).unwrap_or(u32::MAX);
    put(&mut attr, 0, &raw.to_ne_bytes());
    put(&mut attr, 4, &20u32.to_ne_bytes());
    put(&mut attr, 8, &(info.as_mut_ptr() as u64).to_ne_bytes());
    // The kernel writes at most info_len (20) bytes to `info`.
    bpf_call(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&info[8..16]);
    let jited = info[16..20] != [0; 4];
    Ok((tag, jited))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write `bytes` into `attr` at `at`.
pub fn put(attr: &mut [u8], at: usize, bytes: &[u8]) {
    attr[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Load a `BPF_PROG_TYPE_SCHED_CLS` program (GPL) of `insns` (`struct
/// bpf_insn`s as the kernel takes them), named `name` (at most 15 bytes).
pub fn load_sched_cls(insns: &[[u8; 8]], name: &[u8]) -> Result<OwnedFd, KernelError> {
    let code: Vec<u8> = insns.concat();
    let count = u32::try_from(insns.len())
        .map_err(|_| KernelError::Netlink("bpf: program too long".into()))?;
    let license = b"GPL\0";
    let mut attr = [0u8; ATTR_SIZE];
    put(&mut attr, 0, &BPF_PROG_TYPE_SCHED_CLS.to_ne_bytes());
    put(&mut attr, 4, &count.to_ne_bytes());
    put(&mut attr, 8, &(code.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 16, &(license.as_ptr() as u64).to_ne_bytes());
    // prog_name follows log_level, log_size, log_buf, kern_version, prog_flags.
    put(&mut attr, 48, &name[..name.len().min(15)]);
    bpf(BPF_PROG_LOAD, &mut attr)
}

/// bpf(2) with a command whose result is a new fd.
pub fn bpf(cmd: libc::c_long, attr: &mut [u8; ATTR_SIZE]) -> Result<OwnedFd, KernelError> {
    let fd = bpf_call(cmd, attr)?;
    let fd = i32::try_from(fd).map_err(|_| KernelError::Netlink("bpf: fd out of range".into()))?;
    // SAFETY: a non-negative bpf(2) result of a command that makes an fd is
    // a new fd this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// bpf(2): its non-negative result, or the errno. `attr` is laid out as the
/// `union bpf_attr` member of `cmd`, and every pointer it holds points to a
/// buffer, live for the call, of the size that member gives it.
fn bpf_call(cmd: libc::c_long, attr: &mut [u8; ATTR_SIZE]) -> Result<libc::c_long, KernelError> {
    // SAFETY: attr is a valid, writable buffer of ATTR_SIZE bytes, which
    // the kernel reads at most; the pointers in it are valid (above).
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), ATTR_SIZE) };
    if rc < 0 {
        return Err(KernelError::Errno(nix::errno::Errno::last()));
    }
    Ok(rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_reads_the_classid_and_redirects_to_egress() {
        // __sk_buff.tc_classid is at offset 72 (uapi/linux/bpf.h).
        assert_eq!(INSNS[0][2], 72);
        assert_eq!(INSNS[2][4], 23, "BPF_FUNC_redirect");
        assert_eq!(INSNS.concat().len(), 32);
    }
}
