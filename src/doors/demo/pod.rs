//! Throwaway network namespaces for `podtap demo`, built over netlink the way a CNI plugin would.
//!
//! A named netns is a bind mount of a thread's `/proc/thread-self/ns/net`
//! onto a file under `/run/netns`, which is what `ip netns add` makes.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

use rtnetlink::packet_route::RouteNetlinkMessage as Msg;

use crate::error::{Error, KernelError, Result};
use crate::kernel::batch::Request;
use crate::kernel::links;
use crate::kernel::netlink::Netlink;

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
        let result = std::thread::spawn(move || -> io::Result<()> {
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
        .join();
        match result {
            Ok(Ok(())) => Ok(pinned),
            Ok(Err(e)) => Err(Error::kernel(
                &path.display().to_string(),
                "create netns",
                "",
                e,
            )),
            Err(_) => Err(Error::Invalid(format!(
                "netns {}: creating thread panicked",
                path.display()
            ))),
        }
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
        demo.wire()?;
        Ok(demo)
    }

    /// The veth pair, its addresses and the pod's default routes.
    fn wire(&self) -> Result<()> {
        use std::os::fd::AsRawFd;

        use rtnetlink::{LinkUnspec, LinkVeth};

        let peer_ns = crate::kernel::netns::NetNs::open(self.peer.path(), false)?;
        let pod_ns = crate::kernel::netns::NetNs::open(self.pod.path(), false)?;
        let peer = Netlink::connect(&peer_ns)?;
        let pod = Netlink::connect(&pod_ns)?;
        let pod_file =
            File::open(self.pod.path()).map_err(|e| Error::io("open", self.pod.path(), e))?;

        let veth = LinkVeth::new("veth-pod", "eth0").build();
        links::add(&peer.batch, veth).map_err(|e| peer.err("add veth", "", e))?;
        let eth0 = link_index(&peer, "eth0")?;
        let host_end = link_index(&peer, "veth-pod")?;
        let to_pod = LinkUnspec::new_with_index(eth0)
            .setns_by_fd(pod_file.as_raw_fd())
            .build();
        peer.batch
            .request(Request::create(Msg::SetLink(to_pod)))
            .map_err(|e| peer.err("move veth into pod netns", "eth0", e))?;
        let eth0 = link_index(&pod, "eth0")?;
        let lo = link_index(&pod, "lo")?;

        for (nl, idx) in [(&peer, host_end), (&pod, eth0), (&pod, lo)] {
            links::set_up(&nl.batch, idx).map_err(|e| nl.err("set up", "", e))?;
        }
        for (nl, idx, name, cidr) in [
            (&peer, host_end, "veth-pod", "198.18.0.1/24"),
            (&peer, host_end, "veth-pod", "2001:db8:0:1::1/64"),
            (&pod, eth0, "eth0", DEMO_POD_V4),
            (&pod, eth0, "eth0", DEMO_POD_V6),
        ] {
            add_address(nl, idx, cidr).map_err(|e| nl.err("add address", name, e))?;
        }
        default_routes(&pod, eth0)
    }
}

/// The index of link `name` in the netns `nl` talks to.
fn link_index(nl: &Netlink, name: &str) -> Result<u32> {
    links::index_of(&nl.batch, name)
        .map_err(|e| nl.err("list links", name, e))?
        .ok_or_else(|| Error::Invalid(format!("demo: no link {name} after creating it")))
}

/// Add `cidr` to link `idx` (IPv6 without DAD).
fn add_address(nl: &Netlink, idx: u32, cidr: &str) -> std::result::Result<(), KernelError> {
    use std::net::IpAddr;

    use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
    use rtnetlink::AddressMessageBuilder;

    let (ip, len) = cidr.split_once('/').unwrap_or((cidr, "128"));
    let ip: IpAddr = ip.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let len = len.parse().unwrap_or(32);
    let msg = match ip {
        IpAddr::V4(v4) => AddressMessageBuilder::<std::net::Ipv4Addr>::new()
            .index(idx)
            .address(v4, len)
            .build(),
        IpAddr::V6(v6) => {
            let mut m = AddressMessageBuilder::<std::net::Ipv6Addr>::new()
                .index(idx)
                .address(v6, len)
                .build();
            m.attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
            m
        }
    };
    nl.batch.request(Request::create(Msg::NewAddress(msg)))
}

/// The pod's default routes (v4 and v6) via the peer, out of `eth0`.
fn default_routes(pod: &Netlink, eth0: u32) -> Result<()> {
    use rtnetlink::RouteMessageBuilder;

    let v4 = RouteMessageBuilder::<std::net::Ipv4Addr>::new()
        .gateway([198, 18, 0, 1].into())
        .output_interface(eth0)
        .build();
    let v6 = RouteMessageBuilder::<std::net::Ipv6Addr>::new()
        .gateway(
            DEMO_PEER_V6
                .parse()
                .unwrap_or(std::net::Ipv6Addr::UNSPECIFIED),
        )
        .output_interface(eth0)
        .build();
    for route in [v4, v6] {
        pod.batch
            .request(Request::create(Msg::NewRoute(route)))
            .map_err(|e| pod.err("add default route", "eth0", e))?;
    }
    Ok(())
}
