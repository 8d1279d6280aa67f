//! The packet socket a TAP's guest is served on: `AF_PACKET`, bound to the
//! TAP for every protocol (such a socket sees a frame before tc ingress,
//! which then stops it: see `kernel::tc`'s stop filters), with a classic
//! BPF filter so the kernel queues only what the engine answers.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const SO_ATTACH_FILTER: libc::c_int = 26;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL: u16 = 0x0003;

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const LD_H_ABS: u16 = 0x28; // BPF_LD | BPF_H | BPF_ABS
const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
const LD_H_IND: u16 = 0x48; // BPF_LD | BPF_H | BPF_IND
const LDX_B_MSH: u16 = 0xb1; // BPF_LDX | BPF_B | BPF_MSH: X = 4 * (pkt[k] & 0xf)
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
/// Ancillary loads: SKF_AD_OFF + SKF_AD_PKTTYPE / SKF_AD_VLAN_TAG_PRESENT.
const AD_PKTTYPE: u32 = 0xffff_f000 + 4;
const AD_VLAN_PRESENT: u32 = 0xffff_f000 + 48;
const PACKET_OUTGOING: u32 = 4;

/// The socket filter. Jumps are relative: target = index + 1 + offset.
/// Passes only what the engine can answer, so the kernel queues nothing
/// else: IPv4 UDP to port 67 (not a non-first fragment), IPv6 UDP to 547
/// and ICMPv6 RS/NS with no extension header. Frames we send ourselves
/// (PACKET_OUTGOING) and VLAN-tagged ones (tag in-band or offloaded) fail.
pub const FILTER: [libc::sock_filter; 24] = [
    /* 0 */ stmt(LD_W_ABS, AD_PKTTYPE),
    /* 1 */ jump(JEQ_K, PACKET_OUTGOING, 21, 0), // -> 23 drop
    /* 2 */ stmt(LD_W_ABS, AD_VLAN_PRESENT),
    /* 3 */ jump(JEQ_K, 0, 0, 19), // tagged -> 23 drop
    /* 4 */ stmt(LD_H_ABS, 12), // ethertype (0x8100 fails both tests)
    /* 5 */ jump(JEQ_K, 0x0800, 1, 0), // -> 7 IPv4
    /* 6 */ jump(JEQ_K, 0x86dd, 7, 16), // -> 14 IPv6, else 23 drop
    /* 7 */ stmt(LD_B_ABS, 23), // IPv4 protocol
    /* 8 */ jump(JEQ_K, 17, 0, 14), // not UDP -> 23 drop
    /* 9 */ stmt(LD_H_ABS, 20), // flags and fragment offset
    /* 10 */ jump(JSET_K, 0x1fff, 12, 0), // non-first fragment -> 23 drop
    /* 11 */ stmt(LDX_B_MSH, 14), // X = IPv4 header length
    /* 12 */ stmt(LD_H_IND, 16), // UDP destination port: 14 + X + 2
    /* 13 */ jump(JEQ_K, 67, 8, 9), // -> 22 accept, else 23 drop
    /* 14 */ stmt(LD_B_ABS, 20), // IPv6 next header
    /* 15 */ jump(JEQ_K, 17, 0, 2), // not UDP -> 18
    /* 16 */ stmt(LD_H_ABS, 56), // UDP destination port: 14 + 40 + 2
    /* 17 */ jump(JEQ_K, 547, 4, 5), // -> 22 accept, else 23 drop
    /* 18 */ jump(JEQ_K, 58, 0, 4), // not ICMPv6 -> 23 drop
    /* 19 */ stmt(LD_B_ABS, 54), // ICMPv6 type
    /* 20 */ jump(JEQ_K, 133, 1, 0), // RS -> 22 accept
    /* 21 */ jump(JEQ_K, 135, 0, 1), // NS -> 22 accept, else 23 drop
    /* 22 */ stmt(RET_K, 0xffff), // accept (the buffer bounds what we read)
    /* 23 */ stmt(RET_K, 0), // drop
];

/// A packet socket bound to one interface, filtered to DHCPv4, DHCPv6 and router and neighbour solicitations (a classic BPF program).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

impl PacketSocket {
    /// Opens the socket with protocol 0 (it receives nothing yet), attaches
    /// the filter, then binds it to `ifindex` for every protocol: no frame
    /// is queued before the filter is in place.
    pub fn open(ifindex: u32) -> io::Result<PacketSocket> {
        let ty = libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: socket(2) takes no pointers; the result is checked.
        let raw = check(unsafe { libc::socket(libc::AF_PACKET, ty, 0) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = PacketSocket { fd, ifindex };
        sock.attach_filter()?;
        // Kernels before 4.20 lack the option; the filter drops outgoing too.
        let _ = sock.set_int(libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        sock.bind()?;
        Ok(sock)
    }

    /// The interface it is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The descriptor, to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The socket from a descriptor received from another process (the
    /// attach that opened it), bound to `ifindex`.
    pub fn from_fd(fd: OwnedFd, ifindex: u32) -> PacketSocket {
        PacketSocket { fd, ifindex }
    }

    /// Give the descriptor up (to send it to the daemon).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    fn set_int(&self, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
        let len = libc::socklen_t::try_from(size_of::<libc::c_int>()).map_err(io::Error::other)?;
        // SAFETY: the pointer and length describe `v`, alive for the call.
        check(unsafe {
            libc::setsockopt(self.fd.as_raw_fd(), level, name, (&raw const v).cast(), len)
        })?;
        Ok(())
    }

    fn attach_filter(&self) -> io::Result<()> {
        let mut prog = FILTER;
        let fprog = libc::sock_fprog {
            len: u16::try_from(prog.len()).map_err(io::Error::other)?,
            filter: prog.as_mut_ptr(),
        };
        let len =
            libc::socklen_t::try_from(size_of::<libc::sock_fprog>()).map_err(io::Error::other)?;
        let fd = self.fd.as_raw_fd();
        // SAFETY: `fprog` points at `prog`, both alive for the call; the
        // kernel copies the program.
        check(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_ATTACH_FILTER,
                (&raw const fprog).cast(),
                len,
            )
        })?;
        Ok(())
    }

    fn bind(&self) -> io::Result<()> {
        let ifindex = libc::c_int::try_from(self.ifindex).map_err(io::Error::other)?;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = u16::try_from(libc::AF_PACKET).map_err(io::Error::other)?;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        let len =
            libc::socklen_t::try_from(size_of::<libc::sockaddr_ll>()).map_err(io::Error::other)?;
        // SAFETY: the pointer and length describe `sll`, alive for the call.
        check(unsafe { libc::bind(self.fd.as_raw_fd(), (&raw const sll).cast(), len) })?;
        Ok(())
    }

    /// Reads one frame. `Ok(None)`: nothing queued. A frame longer than
    /// `buf` is consumed and reported as `Ok(Some(0))` (never answered).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: the pointer and length describe `buf`; MSG_TRUNC makes
        // the kernel report the real length but write at most `buf.len()`.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let n = usize::try_from(n).map_err(io::Error::other)?;
        Ok(Some(if n > buf.len() { 0 } else { n }))
    }

    /// Sends one complete Ethernet frame out of the bound interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: the pointer and length describe `frame`.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
