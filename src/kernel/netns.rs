//! The one way into a network namespace.
//!
//! `setns(2)` changes only the calling thread, so podtap never calls it on
//! its caller's. [`NetNs::open_netlink`] starts a thread that stays in the
//! namespace for the command's further work there ([`NetnsWorker`]);
//! [`NetNs::run`] enters it on a fresh OS thread that exits when the work is
//! done, for the rare visits without sockets. Sockets and `/dev/net/tun`
//! fds created there keep that namespace for life, so the thread hands them
//! back and the caller's thread uses them.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket};

use super::errno;
use super::netns_id::{socket_cookie, NetnsId};
use super::netns_worker::{NetnsWorker, Starting};
use crate::error::{Error, NotNetns, Result};

/// `PROC_NET_INIT_INO`: the nsfs inode of the kernel's initial netns.
const INIT_NET_INODE: u64 = 0xEFFF_FFF9;

/// An opened, validated network namespace.
#[derive(Debug)]
pub struct NetNs {
    path: PathBuf,
    file: File,
    dev: u64,
    inode: u64,
}

/// The kernel objects a netns thread hands back for the caller to use.
pub struct NetnsLink {
    /// A blocking socket for requests and dumps ([`super::batch`]).
    pub batch: Socket,
    pub ipv6_enabled: bool,
    /// `SO_NETNS_COOKIE`: unlike the nsfs inode, never reused for a later netns.
    pub cookie: Option<u64>,
    /// The thread that opened them, still inside the netns for more work.
    pub worker: NetnsWorker,
}

/// The sockets of [`NetnsLink`] while the netns thread is still opening them.
#[derive(Debug)]
pub struct OpeningLink {
    starting: Starting<(Socket, bool)>,
}

impl OpeningLink {
    /// Wait for the sockets of `ns` (the netns they were opened for).
    pub fn finish(self, ns: &NetNs) -> Result<NetnsLink> {
        let (worker, (batch, ipv6_enabled)) =
            self.starting.wait().map_err(|e| ns.entry_error(e))?;
        let cookie = socket_cookie(batch.as_fd());
        Ok(NetnsLink {
            batch,
            ipv6_enabled,
            cookie,
            worker,
        })
    }
}

impl NetNs {
    /// Open `path` and verify it is a network namespace (and not the host's, unless allowed).
    pub fn open(path: &Path, allow_host: bool) -> Result<Self> {
        // O_PATH first: it never blocks (a FIFO) and has no side effects (a
        // device node); every check below is on this fd, never on the path.
        let opath = nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| open_error(path, e.into()))?;
        Self::from_opath(path, opath, allow_host)
    }

    /// A netns from an `O_PATH` fd that `path` names (for messages):
    /// checked on the fd (file type, nsfs, namespace type), then reopened
    /// through `/proc/self/fd` (the same file, no path lookup) for use.
    pub fn from_opath(path: &Path, opath: OwnedFd, allow_host: bool) -> Result<Self> {
        let pre = nix::sys::stat::fstat(&opath).map_err(|e| Error::io("netns", path, e.into()))?;
        if let Some(what) = not_a_file(pre.st_mode) {
            return Err(Error::NotNetns {
                path: path.into(),
                what,
            });
        }
        // nsfs is the filesystem behind `/proc/PID/ns/*` and pinned netns files.
        let fs_type = nix::sys::statfs::fstatfs(&opath)
            .map_err(|e| Error::io("netns", path, e.into()))?
            .filesystem_type()
            .0;
        if fs_type != libc::NSFS_MAGIC {
            let what = if pre.st_mode & libc::S_IFMT == libc::S_IFREG {
                NotNetns::RegularFile
            } else {
                NotNetns::Filesystem(fs_type)
            };
            return Err(Error::NotNetns {
                path: path.into(),
                what,
            });
        }
        // An O_PATH fd cannot be used for setns or ioctls: reopen the very
        // file it holds.
        let file = File::open(format!("/proc/self/fd/{}", opath.as_raw_fd()))
            .map_err(|e| Error::io("netns", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("netns", path, e))?;
        if (meta.dev(), meta.ino()) != (pre.st_dev, pre.st_ino) {
            return Err(Error::io(
                "netns",
                path,
                io::Error::other("the reopened fd names another file"),
            ));
        }
        // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd; it
        // returns the CLONE_NEW* flag of the namespace.
        let ns_type = unsafe { libc::ioctl(file.as_raw_fd(), libc::NS_GET_NSTYPE) };
        if ns_type != libc::CLONE_NEWNET {
            return Err(Error::NotNetns {
                path: path.into(),
                what: NotNetns::OtherNamespace,
            });
        }
        let ns = NetNs {
            path: path.into(),
            file,
            dev: meta.dev(),
            inode: meta.ino(),
        };
        if !allow_host && ns.is_host()? {
            return Err(Error::HostNetns { path: path.into() });
        }
        Ok(ns)
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as text, for messages and the description.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// `(st_dev, st_ino)`: what identifies a netns, whatever path names it.
    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.inode)
    }

    pub fn inode(&self) -> u64 {
        self.inode
    }

    pub fn dev(&self) -> u64 {
        self.dev
    }

    /// Whether this is the host's netns: PID 1's, or the kernel's initial one.
    pub fn is_host(&self) -> Result<bool> {
        is_host_identity(self.identity())
    }

    /// This netns's full identity: the cookie is read from a socket made
    /// inside it (on a thread of its own: see [`NetNs::run`]).
    pub fn id(&self) -> Result<NetnsId> {
        let cookie = self.run(|| {
            // SAFETY: a plain netlink socket, owned by `fd` below.
            let raw = unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::NETLINK_ROUTE,
                )
            };
            errno::check(raw)?;
            // SAFETY: raw is a fresh fd nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            Ok(socket_cookie(fd.as_fd()))
        })?;
        Ok(NetnsId::new(self.identity(), cookie))
    }

    /// The netns fd, for as long as `self` lives.
    pub fn borrow_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// A second fd on this netns.
    pub fn fd_clone(&self) -> Result<OwnedFd> {
        self.file
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("dup netns fd of", self.path.clone(), e))
    }

    /// Run `work` on a fresh thread inside this netns and return its result.
    pub fn run<T, F>(&self, work: F) -> Result<T>
    where
        T: Send,
        F: FnOnce() -> io::Result<T> + Send,
    {
        let fd = self.file.as_fd();
        let result = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("podtap-netns".into())
                .spawn_scoped(s, move || -> io::Result<T> {
                    setns(fd, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
                    work()
                })
                .map(|h| h.join())
        });
        match result {
            Ok(Ok(value)) => value.map_err(|e| self.entry_error(e)),
            Ok(Err(_)) => Err(Error::io(
                "run netns worker for",
                self.path.clone(),
                io::Error::other("worker thread panicked"),
            )),
            Err(e) => Err(Error::io("spawn netns thread for", self.path.clone(), e)),
        }
    }

    /// Start a [`NetnsWorker`] inside the netns, which opens an rtnetlink
    /// socket there (for requests and dumps) and
    /// learns whether IPv6 is on, while the caller goes on with its locks
    /// and its runtime; [`OpeningLink::finish`] collects them. Opening
    /// sockets changes nothing in the netns, so this may run before any
    /// lock is held.
    pub fn open_netlink(&self) -> Result<OpeningLink> {
        self.open_sockets(true)
    }

    /// [`Self::open_netlink`] for work that never describes the netns
    /// (check, detach): IPv6 is not probed, and `ipv6_enabled` is false.
    /// The probe opens a file under /proc/sys/net, whose lookup walks the
    /// dentries of every netns on the node that looked there after this
    /// one did (0.5 ms for the oldest pod of 500: `benches/scale.py`).
    pub fn open_netlink_bare(&self) -> Result<OpeningLink> {
        self.open_sockets(false)
    }

    fn open_sockets(&self, probe_ipv6: bool) -> Result<OpeningLink> {
        let starting = NetnsWorker::spawn(self.fd_clone()?, self.display(), move || {
            let batch = netlink_socket()?;
            // /proc/sys/net shows the netns of the thread that opens it.
            let ipv6 = probe_ipv6
                && match std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6") {
                    Ok(s) => s.trim() == "0",
                    Err(_) => false,
                };
            Ok((batch, ipv6))
        })
        .map_err(|e| self.entry_error(e))?;
        Ok(OpeningLink { starting })
    }

    /// The error for work inside the netns that failed with `e`.
    fn entry_error(&self, e: io::Error) -> Error {
        errno::entering(&self.path, e)
    }
}

/// A bound rtnetlink socket in the calling thread's netns, taking datagrams
/// from the kernel only.
fn netlink_socket() -> io::Result<Socket> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    super::nlrecv::from_kernel_only(&socket)?;
    // A 64-link dump overflows the default buffer on busy machines.
    socket.set_rx_buf_sz(1 << 20)?;
    Ok(socket)
}

/// Whether `(dev, inode)` is the host's netns: PID 1's, or the kernel's initial one.
pub fn is_host_identity((dev, inode): (u64, u64)) -> Result<bool> {
    let host = Path::new("/proc/1/ns/net");
    match std::fs::metadata(host) {
        Ok(meta) => Ok((meta.dev(), meta.ino()) == (dev, inode)),
        // Inside a sandbox PID 1 may be a process we cannot inspect; the
        // initial netns still has a fixed inode number on current kernels.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(inode == INIT_NET_INODE),
        Err(e) => Err(Error::io("host netns", host, e)),
    }
}

/// What a non-regular file is, for the "not a network namespace" message.
/// nsfs files (pinned or `/proc/PID/ns/net`) stat as regular files.
fn not_a_file(mode: libc::mode_t) -> Option<NotNetns> {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => Some(NotNetns::Directory),
        libc::S_IFIFO => Some(NotNetns::Fifo),
        libc::S_IFSOCK => Some(NotNetns::Socket),
        libc::S_IFCHR => Some(NotNetns::CharDevice),
        libc::S_IFBLK => Some(NotNetns::BlockDevice),
        _ => None,
    }
}

fn open_error(path: &Path, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::NotFound => Error::NetnsMissing { path: path.into() },
        _ => Error::io("netns", path, e),
    }
}
