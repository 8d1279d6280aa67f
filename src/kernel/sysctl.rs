//! Per-interface IPv6 switches (`net.ipv6.conf.<if>.disable_ipv6`).
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
