//! TAP devices through `/dev/net/tun` ioctls.
//!
//! An fd of `/dev/net/tun` belongs to the netns it was opened in, and so does
//! the TAP that `TUNSETIFF` makes on it, whichever thread asks: open it on a
//! netns thread ([`crate::kernel::netns_worker`]; [`TapMaker`] opens them
//! ahead for another thread to use). Each open + `TUNSETIFF` with the same name
//! is one queue; the creator and every opener must agree on `IFF_MULTI_QUEUE`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use super::errno::check;
use super::mac::MacAddr;

const TUN_DEVICE: &str = "/dev/net/tun";

// TUNSETIFF flags as `c_short`, the width `ifreq.ifr_flags` has (libc exports
// them as c_int). Every one fits in 16 bits.
#[allow(clippy::cast_possible_truncation)]
const IFF_TAP: libc::c_short = libc::IFF_TAP as libc::c_short;
#[allow(clippy::cast_possible_truncation)]
const IFF_NO_PI: libc::c_short = libc::IFF_NO_PI as libc::c_short;
#[allow(clippy::cast_possible_truncation)]
const IFF_VNET_HDR: libc::c_short = libc::IFF_VNET_HDR as libc::c_short;
#[allow(clippy::cast_possible_truncation)]
const IFF_MULTI_QUEUE: libc::c_short = libc::IFF_MULTI_QUEUE as libc::c_short;
/// Fail with EBUSY instead of attaching to a TAP of that name that already exists.
/// (0x8000: the sign bit of the 16-bit flags field.)
#[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
const IFF_TUN_EXCL: libc::c_short = libc::IFF_TUN_EXCL as u16 as libc::c_short;

/// A `struct ifreq` for TUNSETIFF: the name, then the flags.
fn ifreq(name: &str, flags: libc::c_short) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    let mut req = empty_ifreq();
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = libc::c_char::from_ne_bytes([*src]);
    }
    req.ifr_ifru.ifru_flags = flags;
    Ok(req)
}

fn empty_ifreq() -> libc::ifreq {
    // SAFETY: ifreq is plain old data (a name array and a union of integers,
    // sockaddrs and a pointer); all-zero is a valid value of each.
    unsafe { std::mem::zeroed() }
}

/// How a TAP is opened: these flags must match between creator and openers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapFlags {
    pub vnet_hdr: bool,
    pub multi_queue: bool,
}

impl TapFlags {
    fn bits(self) -> libc::c_short {
        let mut f = IFF_TAP | IFF_NO_PI;
        if self.vnet_hdr {
            f |= IFF_VNET_HDR;
        }
        if self.multi_queue {
            f |= IFF_MULTI_QUEUE;
        }
        f
    }
}

/// One open queue of a TAP.
#[derive(Debug)]
pub struct TapQueue {
    file: File,
}

impl TapQueue {
    /// Open `/dev/net/tun` and attach to (or create) TAP `name` in the current thread's netns.
    pub fn open(name: &str, flags: TapFlags) -> io::Result<Self> {
        Self::open_bits(name, flags.bits())
    }

    fn open_bits(name: &str, bits: libc::c_short) -> io::Result<Self> {
        Self::attach_bits(open_tun()?, name, bits)
    }

    /// `TUNSETIFF` on `file`, a `/dev/net/tun` fd: the TAP is made (or
    /// found) in the netns `file` was opened in, whichever thread asks.
    fn attach_bits(file: File, name: &str, bits: libc::c_short) -> io::Result<Self> {
        let mut req = ifreq(name, bits)?;
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq` we own for the call's duration.
        check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
        Ok(TapQueue { file })
    }

    /// Keep the TAP after this fd closes, so a VMM can open it by name later.
    pub fn set_persist(&self, on: bool) -> io::Result<()> {
        // SAFETY: TUNSETPERSIST takes an int by value.
        check(unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                libc::TUNSETPERSIST,
                libc::c_ulong::from(on),
            )
        })
    }

    /// Let this uid open the TAP without CAP_NET_ADMIN.
    pub fn set_owner(&self, uid: u32) -> io::Result<()> {
        // SAFETY: TUNSETOWNER takes the uid by value; a pointer would be taken as the uid.
        check(unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                libc::TUNSETOWNER,
                libc::c_ulong::from(uid),
            )
        })
    }

    /// Let this gid open the TAP without CAP_NET_ADMIN.
    pub fn set_group(&self, gid: u32) -> io::Result<()> {
        // SAFETY: TUNSETGROUP takes the gid by value.
        check(unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                libc::TUNSETGROUP,
                libc::c_ulong::from(gid),
            )
        })
    }

    /// The TAP's hardware address. The tun driver answers SIOCGIFHWADDR on
    /// its own fd, so no socket is needed.
    pub fn mac(&self) -> io::Result<MacAddr> {
        let mut req = empty_ifreq();
        // SAFETY: SIOCGIFHWADDR writes a `struct ifreq` we own.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) })?;
        // SAFETY: SIOCGIFHWADDR filled in ifru_hwaddr; sa_data is plain bytes.
        let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
        let bytes: Vec<u8> = data.iter().take(6).map(|b| b.to_ne_bytes()[0]).collect();
        MacAddr::from_bytes(&bytes)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no hardware address"))
    }

    /// Prove that `ifindex`, which `name` resolved to, is this fd's TAP:
    /// the link at `ifindex` is named `name` (SIOCGIFNAME, by index) and
    /// this fd's TAP is named `name` (TUNGETIFF, on the fd) after it. Names
    /// are unique in a netns, so a process renaming links there between the
    /// lookup and these reads makes one of them disagree (EAGAIN) rather than
    /// hand podtap another link's ifindex.
    fn prove_ifindex(&self, names: &LinkNames, name: &str, ifindex: u32) -> io::Result<()> {
        let at_index = names.name_at(ifindex)?;
        let ours = name_of(self.file.as_raw_fd())?;
        if at_index == name && ours == name {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "TAP {name} was renamed while it was created (ifindex {ifindex} is now {at_index:?}, the TAP {ours:?})"
            ),
        ))
    }

    /// The fd, for handing to a VMM.
    pub fn into_fd(self) -> OwnedFd {
        self.file.into()
    }
}

/// A TAP to create.
#[derive(Debug, Clone)]
pub struct TapSpec {
    pub name: String,
    pub flags: TapFlags,
    pub owner: Option<u32>,
    pub group: Option<u32>,
}

/// Create a persistent TAP on `file`, a `/dev/net/tun` fd opened in the
/// netns of `names`, and return its ifindex and hardware address (the
/// kernel picks a random one). One `names` serves every TAP a thread makes.
///
/// If a step after TUNSETIFF fails, the fd closes unpersisted and the kernel
/// removes the half-made TAP by itself.
fn create_persistent(file: File, spec: &TapSpec, names: &LinkNames) -> io::Result<(u32, MacAddr)> {
    // Exclusive: never take over a TAP someone else made under this name.
    let queue = TapQueue::attach_bits(file, &spec.name, spec.flags.bits() | IFF_TUN_EXCL)?;
    if let Some(uid) = spec.owner {
        queue.set_owner(uid)?;
    }
    if let Some(gid) = spec.group {
        queue.set_group(gid)?;
    }
    let mac = queue.mac()?;
    // Learn the ifindex while the fd still owns the TAP: once persistent, a
    // TAP whose ifindex we failed to learn would be one nobody records.
    // `names` was opened in the TAP's netns, so the name resolves there.
    let ifindex = names.index_of(&spec.name)?;
    queue.prove_ifindex(names, &spec.name, ifindex)?;
    queue.set_persist(true)?;
    Ok((ifindex, mac))
}

/// `/dev/net/tun`, opened in the calling thread's netns.
fn open_tun() -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(TUN_DEVICE)
}

/// The ifindex and MAC of each TAP made, in order, and the name and error
/// of the one that stopped the making, if any.
pub type MadeTaps = (Vec<(u32, MacAddr)>, Option<(String, io::Error)>);

/// What making TAPs in one netns takes, opened inside it: `/dev/net/tun`
/// fds (each makes its TAP in the netns it was opened in) and the socket
/// that looks names up there. Opened ahead on the netns thread, they let
/// any thread make the TAPs.
pub struct TapMaker {
    /// One per TAP, in order; a failed open is reported by the TAP it was for.
    tuns: Vec<io::Result<File>>,
    names: LinkNames,
}

impl TapMaker {
    /// Open `count` `/dev/net/tun` fds and the lookup socket in the calling
    /// thread's netns.
    pub fn open(count: usize) -> io::Result<Self> {
        let names = LinkNames::open()?;
        let tuns = (0..count).map(|_| open_tun()).collect();
        Ok(TapMaker { tuns, names })
    }

    /// How many TAPs it can make.
    pub fn capacity(&self) -> usize {
        self.tuns.len()
    }

    /// Make the persistent TAPs of `specs` in order (see [`create_persistent`]).
    pub fn create(self, specs: &[TapSpec]) -> MadeTaps {
        let mut made = Vec::with_capacity(specs.len());
        let mut tuns = self.tuns.into_iter();
        for spec in specs {
            let one = tuns
                .next()
                .unwrap_or_else(|| Err(io::Error::other("no /dev/net/tun fd left")))
                .and_then(|file| create_persistent(file, spec, &self.names));
            match one {
                Ok(made_one) => made.push(made_one),
                Err(e) => return (made, Some((spec.name.clone(), e))),
            }
        }
        (made, None)
    }
}

/// Set the queue flags of an open macvtap queue (`TUNSETIFF`; a macvtap
/// ignores the name and accepts only `IFF_TAP | IFF_NO_PI` plus vnet_hdr
/// and multi-queue).
pub fn set_flags(fd: std::os::fd::RawFd, flags: TapFlags) -> io::Result<()> {
    let mut req = empty_ifreq();
    req.ifr_ifru.ifru_flags = flags.bits();
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq` we own for the call's duration.
    check(unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut req) })
}

/// The name of the link an open TAP or macvtap queue belongs to (`TUNGETIFF`).
pub fn name_of(fd: std::os::fd::RawFd) -> io::Result<String> {
    let mut req = empty_ifreq();
    // SAFETY: TUNGETIFF writes a `struct ifreq` we own.
    check(unsafe { libc::ioctl(fd, libc::TUNGETIFF, &mut req) })?;
    name_in(&req)
}

/// A datagram socket for looking links up by name and by index
/// (SIOCGIFINDEX, SIOCGIFNAME) in the netns it was opened in: one for
/// every TAP a thread makes, instead of two sockets opened and closed per TAP.
pub struct LinkNames(OwnedFd);

impl LinkNames {
    /// Open it in the calling thread's netns.
    pub fn open() -> io::Result<Self> {
        // SAFETY: a plain datagram socket, closed when the value drops.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        check(fd)?;
        // SAFETY: fd is a fresh socket that nothing else owns.
        Ok(Self(unsafe {
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        }))
    }

    /// The ifindex of the link named `name` (SIOCGIFINDEX, as if_nametoindex).
    pub fn index_of(&self, name: &str) -> io::Result<u32> {
        let mut req = ifreq(name, 0)?;
        // SAFETY: SIOCGIFINDEX reads the name and writes the index of a `struct ifreq` we own.
        check(unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SIOCGIFINDEX, &mut req) })?;
        // SAFETY: SIOCGIFINDEX filled in ifru_ifindex.
        let index = unsafe { req.ifr_ifru.ifru_ifindex };
        u32::try_from(index)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "negative ifindex"))
    }

    /// The name of the link at `ifindex` (SIOCGIFNAME).
    fn name_at(&self, ifindex: u32) -> io::Result<String> {
        let mut req = empty_ifreq();
        req.ifr_ifru.ifru_ifindex = libc::c_int::try_from(ifindex).unwrap_or(0);
        // SAFETY: SIOCGIFNAME reads the index and writes the name of a `struct ifreq` we own.
        check(unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SIOCGIFNAME, &mut req) })?;
        name_in(&req)
    }
}

/// The interface name an `ifreq` holds (NUL-terminated, at most IFNAMSIZ).
fn name_in(req: &libc::ifreq) -> io::Result<String> {
    let bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .map(|c| c.to_ne_bytes()[0])
        .take_while(|b| *b != 0)
        .collect();
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Open `queues` queues of an existing TAP (for handing fds to a VMM).
pub fn open_queues(name: &str, flags: TapFlags, queues: u32) -> io::Result<Vec<OwnedFd>> {
    (0..queues)
        .map(|_| TapQueue::open(name, flags).map(TapQueue::into_fd))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_takes_names_that_fit() {
        assert_eq!(std::mem::size_of::<libc::ifreq>(), 40);
        assert!(
            ifreq("abcdefghijklmnop", 0).is_err(),
            "16 bytes does not fit"
        );
        assert!(ifreq("abcdefghijklmno", 0).is_ok());
        assert!(ifreq("", 0).is_err());
    }

    #[test]
    fn flags_follow_options() {
        let f = TapFlags {
            vnet_hdr: true,
            multi_queue: false,
        }
        .bits();
        assert_eq!(f, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
        let mq = TapFlags {
            vnet_hdr: false,
            multi_queue: true,
        }
        .bits();
        assert_eq!(mq, IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE);
    }
}
