//! Throwaway network namespaces for `podtap demo`, built the way a CNI
//! plugin would, with rtnetlink's own async API on a tokio runtime of
//! the demo's: a fixture of the demo, not something podtap does.
//!
//! A named netns is a bind mount of a thread's `/proc/thread-self/ns/net`
//! onto a file under `/run/netns`, which is what `ip netns add` makes.

use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder};

use crate::error::{Error, Result};

const NETNS_DIR: &str = "/run/netns";

/// A netns pinned at `/run/netns/NAME`, removed on drop.
#[derive(Debug)]
pub struct PinnedNetns {
    path: PathBuf,
}

impl PinnedNetns {
    /// Create a new, empty netns pinned at `/run/netns/<name>`.
    pub fn create(name: &str) -> Result<Self> {
        std::fs::create_dir_all(NETNS_DIR).map_err(|e| Error::io("create", NETNS_DIR, e))?;
        let path = Path::new(NETNS_DIR).join(name);
        File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("create netns pin", &path, e))?;
        let pinned = PinnedNetns { path: path.clone() };
        let target = path.clone();
        let made = std::thread::spawn(move || -> io::Result<()> {
            unshare(CloneFlags::CLONE_NEWNET)?;
            mount(
                Some("/proc/thread-self/ns/net"),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )?;
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread that makes it panicked")));
        made.map_err(|e| Error::io("create netns", &path, e))?;
        Ok(pinned)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PinnedNetns {
    fn drop(&mut self) {
        let _ = umount2(&self.path, MntFlags::MNT_DETACH);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A pod netns wired to a peer ("node") netns by a veth, as a CNI bridge/ptp plugin leaves it:
/// pod `eth0` with 198.18.0.2/24 and 2001:db8:0:1::2/64, default routes via the peer.
pub struct DemoPod {
    pub peer: PinnedNetns,
    pub pod: PinnedNetns,
}

pub const DEMO_POD_V4: &str = "198.18.0.2/24";
pub const DEMO_PEER_V4: &str = "198.18.0.1";
pub const DEMO_POD_V6: &str = "2001:db8:0:1::2/64";
pub const DEMO_PEER_V6: &str = "2001:db8:0:1::1";

impl DemoPod {
    /// Build it under names derived from `tag` (pid-unique). Removed on drop.
    pub fn create(tag: &str) -> Result<Self> {
        let peer = PinnedNetns::create(&format!("{tag}-node"))?;
        let pod = PinnedNetns::create(&format!("{tag}-pod"))?;
        let demo = DemoPod { peer, pod };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| Error::io("start", "a tokio runtime", e))?;
        runtime
            .block_on(demo.wire(runtime.handle()))
            .map_err(|e| Error::io("build the demo pod in", demo.pod.path(), e))?;
        Ok(demo)
    }

    /// The veth pair, its addresses and the pod's default routes.
    async fn wire(&self, runtime: &tokio::runtime::Handle) -> io::Result<()> {
        let peer = connect(runtime, self.peer.path())?;
        let pod = connect(runtime, self.pod.path())?;
        let pod_file = File::open(self.pod.path())?;
        let veth = LinkVeth::new("veth-pod", "eth0").build();
        peer.link().add(veth).execute().await.map_err(failed)?;
        let eth0 = index(&peer, "eth0").await?;
        let to_pod = LinkUnspec::new_with_index(eth0)
            .setns_by_fd(pod_file.as_raw_fd())
            .build();
        peer.link().set(to_pod).execute().await.map_err(failed)?;
        let host_end = index(&peer, "veth-pod").await?;
        let eth0 = index(&pod, "eth0").await?;
        let lo = index(&pod, "lo").await?;
        for (nl, idx) in [(&peer, host_end), (&pod, eth0), (&pod, lo)] {
            let up = LinkUnspec::new_with_index(idx).up().build();
            nl.link().set(up).execute().await.map_err(failed)?;
        }
        for (nl, idx, cidr) in [
            (&peer, host_end, "198.18.0.1/24"),
            (&peer, host_end, "2001:db8:0:1::1/64"),
            (&pod, eth0, DEMO_POD_V4),
            (&pod, eth0, DEMO_POD_V6),
        ] {
            add_address(nl, idx, cidr).await?;
        }
        default_routes(&pod, eth0).await
    }
}

/// An rtnetlink connection inside the netns at `path`, its task on `runtime`.
/// The socket is made on a thread in that netns and keeps it for life.
fn connect(runtime: &tokio::runtime::Handle, path: &Path) -> io::Result<Handle> {
    let netns = File::open(path)?;
    let runtime = runtime.clone();
    let (connection, handle, _) = std::thread::scope(|s| {
        s.spawn(|| {
            setns(&netns, CloneFlags::CLONE_NEWNET)?;
            let _entered = runtime.enter();
            rtnetlink::new_connection()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("netns thread panicked")))
    })?;
    runtime.spawn(connection);
    Ok(handle)
}

fn failed(e: rtnetlink::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// The index of link `name`.
async fn index(nl: &Handle, name: &str) -> io::Result<u32> {
    let mut links = nl.link().get().match_name(name.to_string()).execute();
    match links.try_next().await.map_err(failed)? {
        Some(link) => Ok(link.header.index),
        None => Err(io::Error::other(format!(
            "no link {name} after creating it"
        ))),
    }
}

/// Add `cidr` to link `idx` (IPv6 without DAD).
async fn add_address(nl: &Handle, idx: u32, cidr: &str) -> io::Result<()> {
    let bad = || io::Error::other(format!("bad address {cidr}"));
    let (ip, len) = cidr.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let len: u8 = len.parse().map_err(|_| bad())?;
    let mut request = nl.address().add(idx, ip, len);
    if ip.is_ipv6() {
        let flags = AddressAttribute::Flags(AddressFlags::Nodad);
        request.message_mut().attributes.push(flags);
    }
    request.execute().await.map_err(failed)
}

/// The pod's default routes (v4 and v6) via the peer, out of `eth0`.
async fn default_routes(pod: &Handle, eth0: u32) -> io::Result<()> {
    let v4 = RouteMessageBuilder::<std::net::Ipv4Addr>::new()
        .gateway([198, 18, 0, 1].into())
        .output_interface(eth0)
        .build();
    let gateway6 = DEMO_PEER_V6
        .parse()
        .map_err(|_| io::Error::other("bad gateway"))?;
    let v6 = RouteMessageBuilder::<std::net::Ipv6Addr>::new()
        .gateway(gateway6)
        .output_interface(eth0)
        .build();
    for route in [v4, v6] {
        pod.route().add(route).execute().await.map_err(failed)?;
    }
    Ok(())
}
