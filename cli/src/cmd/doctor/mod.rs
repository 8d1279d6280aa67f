//! `podtap doctor`: can this node run podtap, in the wiring mode asked about?
//!
//! Probes ([`host`], [`vmm`], and the library's [`podtap::probe`] for the
//! kernel's features) gather what is there; [`checks`] judges it (pure); this module orders and prints the
//! findings. Exit 0 only when every required check is ok, 17 otherwise.

mod checks;
mod host;
mod vmm;

use std::path::PathBuf;

use checks::{judge, Finding, Status};

use crate::error::{exit, Error, Result};
use crate::output::emit_text;
use crate::state_args::StateArgs;
use podtap::model::Wiring;

// What to check (a plain comment: a doc comment would become the subcommand's about).
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
    /// The wiring mode to check the node for (decides which checks are required).
    #[arg(long, default_value = Wiring::NAMES[0], value_parser = Wiring::NAMES)]
    pub mode: String,
    #[command(flatten)]
    pub state: StateArgs,
    /// The CNI configuration dir the runtime reads.
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub cni_conf_dir: PathBuf,
    /// The CNI plugin dir the runtime runs plugins from.
    #[arg(long, default_value = "/opt/cni/bin")]
    pub cni_bin_dir: PathBuf,
}

/// Run every check, print the findings, and return the exit code.
pub fn run(args: &DoctorArgs) -> Result<i32> {
    let mode: Wiring = args.mode.parse()?;
    let findings = findings(args, mode);
    let failed: Vec<&str> = findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .map(|f| f.check.as_str())
        .collect();
    if args.json {
        let doc = serde_json::json!({
            "mode": args.mode,
            "ready": failed.is_empty(),
            "checks": findings,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| Error::Invalid(e.to_string()))?;
        emit_text(&(text + "\n"), None)?;
    } else {
        emit_text(&render(&findings, &args.mode), None)?;
    }
    if failed.is_empty() {
        return Ok(exit::OK);
    }
    eprintln!(
        "podtap: error: node not ready for --mode {}: {} required check(s) failed: {}",
        args.mode,
        failed.len(),
        failed.join(", ")
    );
    Ok(exit::NODE_NOT_READY)
}

/// Every finding, in report order.
fn findings(args: &DoctorArgs, mode: Wiring) -> Vec<Finding> {
    let taps = mode != Wiring::Macvtap;
    let euid = nix::unistd::geteuid().as_raw();
    let mut out = vec![
        judge(
            "privileges",
            true,
            checks::privileges(euid, host::cap_eff().as_deref()),
            "run podtap as root (or with CAP_NET_ADMIN and CAP_SYS_ADMIN)",
        ),
        judge(
            "/dev/net/tun",
            taps,
            host::open_device("/dev/net/tun").map(|()| "opens read-write".into()),
            "load tun (modprobe tun; CONFIG_TUN), or use --mode macvtap",
        ),
    ];
    for (feature, probe) in podtap::probe::features() {
        let probe = probe
            .map(|()| format!("created {} in a throwaway netns", feature.made()))
            .map_err(|e| e.to_string());
        out.push(judge(
            feature.name(),
            feature.needed_by(mode),
            probe,
            checks::fix(feature),
        ));
    }
    out.push(judge(
        "vhost-net",
        false,
        checks::vhost_net(host::open_device("/dev/vhost-net")),
        "modprobe vhost_net (CONFIG_VHOST_NET) for in-kernel virtio-net; VMMs work without it, slower",
    ));
    out.push(judge(
        "netns cookie",
        false,
        host::netns_cookie(),
        "Linux 5.14+ gives SO_NETNS_COOKIE; without it podtap trusts the nsfs inode",
    ));
    let state = args.state.state_dir.as_path();
    out.push(judge(
        "state dir",
        true,
        host::state_dir_trust(state),
        &format!(
            "make it root's and 0700: chown root:root {0} && chmod 0700 {0} (or pick another --state-dir)",
            state.display()
        ),
    ));
    out.push(judge(
        "orphans",
        false,
        host::orphans(state),
        "podtap detach --force --id ID --netns PATH removes them (the next attach of ID there does too)",
    ));
    out.push(judge(
        "state dir filesystem",
        false,
        host::state_dir_fs(state),
        "keep the state dir on tmpfs (/run), where it goes away with the netns at reboot",
    ));
    out.extend(cni_and_vmms(args));
    out
}

fn cni_and_vmms(args: &DoctorArgs) -> Vec<Finding> {
    let mut out = vec![
        judge(
            "cni bin dir",
            false,
            host::cni_bin(&args.cni_bin_dir),
            "podtap cni-install puts the binary there (only the CNI door needs it)",
        ),
        judge(
            "cni conf dir",
            false,
            host::cni_conf(&args.cni_conf_dir),
            "podtap cni-install chains podtap into the conflist the runtime uses (only the CNI door needs it)",
        ),
    ];
    let path = std::env::var("PATH").unwrap_or_default();
    for (kind, prefix) in vmm::KINDS {
        out.push(judge(
            &format!("vmm {kind}"),
            false,
            vmm::describe(kind, &vmm::find(&path, prefix)),
            &format!("install {kind} if this node's VMs run under it (or put it on PATH)"),
        ));
    }
    out
}

/// One line per check: status, name, what was seen, and for a warning or
/// failure what to do; then a summary line.
fn render(findings: &[Finding], mode: &str) -> String {
    let mut out = String::new();
    let colour = super::show::use_colour();
    for f in findings {
        let (word, paint) = match f.status {
            Status::Ok => ("ok", "32"),
            Status::Warn => ("warn", "33"),
            Status::Fail => ("fail", "31"),
        };
        let word = if colour {
            format!("\x1b[{paint}m{word:<4}\x1b[0m")
        } else {
            format!("{word:<4}")
        };
        out.push_str(&format!("{word}  {:<21} {}", f.check, f.detail));
        if let Some(fix) = &f.fix {
            out.push_str(&format!(" -> {fix}"));
        }
        out.push('\n');
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    out.push_str(&format!(
        "mode {mode}: {} ok, {} warn, {} fail\n",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail)
    ));
    out
}
