//! Net sysctls of a netns: per-interface IPv6 switches
//! (`net.ipv6.conf.<if>.disable_ipv6`), and any `/proc/sys/net` key routed
//! wiring reads and writes.
//!
//! `/proc/sys/net` shows the netns of the thread that opens it, so these run
//! on the netns thread ([`NetnsWorker`]). rtnetlink has no request for them.

use std::io;

use super::netns_worker::NetnsWorker;
use crate::error::Result;

fn path(ifname: &str) -> io::Result<String> {
    if ifname.is_empty() || ifname.contains('/') || ifname == "." || ifname == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {ifname:?}"),
        ));
    }
    Ok(format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"))
}

/// Set `disable_ipv6` on each `(ifname, disabled)`; a missing switch (no IPv6) is skipped.
pub fn set_ipv6_disabled(worker: &NetnsWorker, settings: Vec<(String, bool)>) -> Result<()> {
    worker.run(move || {
        for (name, disabled) in &settings {
            match std::fs::write(path(name)?, if *disabled { "1" } else { "0" }) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("net.ipv6.conf.{name}.disable_ipv6: {e}"),
                    ))
                }
            }
        }
        Ok(())
    })
}

/// The file of the net sysctl `key` (`ipv4/conf/eth0/forwarding`): its
/// parts may not leave `/proc/sys/net` (an interface name holds no `/`
/// and is no `.` or `..`).
fn net_path(key: &str) -> io::Result<String> {
    let bad = key.is_empty()
        || key.starts_with('/')
        || key
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad sysctl key {key:?}"),
        ));
    }
    Ok(format!("/proc/sys/net/{key}"))
}

/// The values of the net sysctls `keys` in the netns of `worker`, trimmed;
/// `None` for one the kernel does not have (an older kernel, a gone link).
pub fn read(worker: &NetnsWorker, keys: Vec<String>) -> Result<Vec<Option<String>>> {
    worker.run(move || {
        keys.iter()
            .map(|key| match std::fs::read_to_string(net_path(key)?) {
                Ok(v) => Ok(Some(v.trim().to_string())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io::Error::new(e.kind(), format!("net.{key}: {e}"))),
            })
            .collect()
    })
}

/// Write each `(key, value)` in order in the netns of `worker`; with
/// `skip_missing`, a sysctl the kernel does not have (a gone link) is
/// passed over, else it is an error.
pub fn write(
    worker: &NetnsWorker,
    settings: Vec<(String, String)>,
    skip_missing: bool,
) -> Result<()> {
    worker.run(move || {
        for (key, value) in &settings {
            match std::fs::write(net_path(key)?, value) {
                Ok(()) => {}
                Err(e) if skip_missing && e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("net.{key}={value}: {e}"))),
            }
        }
        Ok(())
    })
}
