//! A stranger in the pod netns: a process group that creates and deletes
//! veth pairs and addresses there as fast as `ip -batch` goes, until it is
//! stopped. Its objects are named `fz<N>a`/`fz<N>b`; its addresses live on
//! `fzaddr`, a veth it creates first and keeps.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use crate::dirs::TempDir;
use crate::netns::Netns;
use crate::run::sh;

/// The churning process group; stopped (and its errors collected) on [`Churn::stop`] or drop.
pub struct Churn {
    child: Option<Child>,
    dir: TempDir,
}

impl Churn {
    /// Start churning in `ns`: `pairs` veth pairs added then deleted per
    /// pass, and as many /32 addresses of 198.19.<net>.0/24 added then
    /// deleted on `fzaddr`.
    pub fn start(ns: &Netns, pairs: u32, net: u32) -> Churn {
        if !link_names(ns).iter().any(|n| n == "fzaddr") {
            prepare(ns);
        }
        let dir = TempDir::new();
        let file = dir.path().join("churn.batch");
        let mut lines = String::new();
        for i in 0..pairs {
            lines.push_str(&format!("link add fz{i}a type veth peer name fz{i}b\n"));
            lines.push_str(&format!(
                "address add 198.19.{net}.{}/32 dev fzaddr\n",
                i % 250 + 1
            ));
        }
        for i in 0..pairs {
            lines.push_str(&format!("link del fz{i}a\n"));
            lines.push_str(&format!(
                "address del 198.19.{net}.{}/32 dev fzaddr\n",
                i % 250 + 1
            ));
        }
        std::fs::write(&file, lines).expect("write churn batch");
        let errors = dir.path().join("errors");
        let script = format!(
            "while :; do ip -n {} -force -batch {} 2>>{} >/dev/null; done",
            ns.name,
            file.display(),
            errors.display()
        );
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the churn");
        Churn {
            child: Some(child),
            dir,
        }
    }

    /// Stop the churn; what `ip` said went wrong while it ran.
    pub fn stop(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            // The whole group: bash and the `ip` it runs now.
            let pgid = nix::unistd::Pid::from_raw(-i32::try_from(child.id()).expect("pid"));
            let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
        }
        std::fs::read_to_string(self.dir.path().join("errors")).unwrap_or_default()
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Make the veth the churn keeps its addresses on (before a snapshot).
pub fn prepare(ns: &Netns) {
    ns.ip("link add fzaddr type veth peer name fzaddrb");
}

/// The churn's errors that would mean someone else removed its objects:
/// a delete that found its link or address already gone.
pub fn stolen(errors: &str) -> Vec<&str> {
    errors
        .lines()
        .filter(|l| l.contains("Cannot find device") || l.contains("Cannot assign requested"))
        .collect()
}

/// Links of `ns` by name.
pub fn link_names(ns: &Netns) -> Vec<String> {
    sh(&format!(
        "ip -n {} -o link show | awk -F': ' '{{print $2}}' | cut -d@ -f1",
        ns.name
    ))
    .lines()
    .map(str::to_string)
    .collect()
}
