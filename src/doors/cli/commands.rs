//! One handler per subcommand.

use crate::error::{exit, Error, Result};
use crate::model::{Description, Dns, Wiring};
use crate::plan::{AttachOptions, TapOwner};
use crate::state::SandboxId;

use super::Command;
use crate::doors::cni::registry::Registry;
use crate::doors::output::{check_output, emit, emit_attached, emit_text};

pub fn dispatch(cli: super::Cli) -> Result<i32> {
    match cli.command {
        Command::Scan {
            netns,
            allow_host_netns,
            output,
        } => {
            let desc = crate::scan::scan(&netns, allow_host_netns)?;
            emit(&desc, output.as_deref())?;
        }
        Command::Attach {
            netns,
            id,
            mode,
            queues,
            no_vnet_hdr,
            tap_owner,
            interfaces,
            dns_from,
            state,
            output,
        } => {
            let id: SandboxId = id.parse()?;
            let mut opts = AttachOptions {
                mode: mode.parse::<Wiring>()?,
                queues,
                vnet_hdr: !no_vnet_hdr,
                interfaces,
                dns: dns_from.as_deref().map(read_resolv_conf).transpose()?,
                ..AttachOptions::default()
            };
            if let Some(owner) = tap_owner.as_deref() {
                let owner: TapOwner = owner
                    .parse()
                    .map_err(|e| Error::Invalid(format!("--tap-owner {e}")))?;
                opts = opts.with_tap_owner(owner);
            }
            if let Some(path) = &output {
                check_output(path)?;
            }
            let state = state.dir();
            let attached = crate::attach::attach_in(&netns, &id, &opts, &state)?;
            emit_attached(&attached, output.as_deref(), &id, &state)?;
        }
        Command::Detach {
            id,
            state,
            force,
            netns,
        } => {
            let id: SandboxId = id.parse()?;
            let state = state.dir();
            let report = if force {
                crate::detach::force_detach(&id, &state, netns.as_deref())?
            } else {
                crate::detach::detach(&id, &state, netns.as_deref())?
            };
            // An attachment made through CNI is recorded there too: detached is detached.
            Registry::new(state.path()).forget(&id)?;
            if !report.found {
                eprintln!("podtap: sandbox {id}: nothing to detach");
            }
            for w in report.warnings {
                eprintln!("podtap: warning: {w}");
            }
        }
        Command::Check { id, state } => {
            crate::check::check(&id.parse()?, &state.dir())?;
            println!("sandbox {id}: ok");
        }
        Command::List { state, json } => super::list::list(&state.dir(), json)?,
        Command::Render {
            format,
            id,
            description,
            state,
        } => {
            let desc = match (id, description) {
                (Some(id), _) => state.dir().description(&id.parse()?)?,
                (None, Some(path)) => read_description(&path)?,
                (None, None) => {
                    return Err(Error::Invalid("render needs --id or --description".into()))
                }
            };
            let mut text = crate::render::render(format, &desc)?;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            emit_text(&text, None)?;
        }
        Command::Exec {
            id,
            vmm,
            vhost,
            enter_netns,
            user,
            state,
            argv,
        } => {
            let user = user.map(|u| u.parse()).transpose()?;
            return crate::doors::exec::exec(
                &id.parse()?,
                &state.dir(),
                (vmm, vhost, enter_netns),
                user,
                &argv,
            );
        }
        Command::Watch {
            id,
            qmp,
            cloud_hypervisor_api,
            vmm_uid,
            state,
        } => {
            let opts = crate::watch::WatchOptions {
                qmp,
                cloud_hypervisor_api,
                vmm_uid,
            };
            crate::watch::watch(&id.parse()?, &state.dir(), &opts, &mut |event| {
                print_event(event)
            })?;
        }
        Command::OciHook { action, args } => return crate::doors::oci_hook::run(&action, &args),
        Command::CniInstall {
            conf_dir,
            bin_dir,
            mode,
            plugin_state_dir,
            pod_policy,
            uninstall,
            wait,
        } => {
            use crate::doors::cni_install;
            let action = match (uninstall, wait) {
                (true, _) => cni_install::Action::Uninstall,
                (false, false) => cni_install::Action::Install,
                (false, true) => cni_install::Action::InstallAndWait,
            };
            let mut entry = cni_install::plugin_entry(&plugin_state_dir, &mode);
            if let Some(policy) = &pod_policy {
                entry = cni_install::with_pod_policy(entry, policy)?;
            }
            cni_install::run(action, &conf_dir, &bin_dir, &entry)?;
        }
        Command::Demo { keep, boot } => crate::doors::demo::run(keep, boot)?,
        Command::Ops(op) => return super::ops::run(op),
    }
    Ok(exit::OK)
}

/// `--dns-from FILE`: a regular file (symlinks followed, as /etc/resolv.conf
/// often is one) of at most 64 KiB. Unreadable, not regular, too long or
/// malformed is invalid input (exit 13). Opened non-blocking, so a FIFO cannot hang attach.
fn read_resolv_conf(path: &std::path::Path) -> Result<Dns> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    const LIMIT: u64 = 64 * 1024;
    let bad = |why: String| Error::Invalid(format!("--dns-from {}: {why}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| bad(e.to_string()))?;
    if !file.metadata().map_err(|e| bad(e.to_string()))?.is_file() {
        return Err(bad("not a regular file".into()));
    }
    let mut text = String::new();
    file.take(LIMIT + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > LIMIT {
        return Err(bad(format!("longer than {LIMIT} bytes")));
    }
    super::resolv_conf::parse(&text).map_err(bad)
}

fn read_description(path: &std::path::Path) -> Result<Description> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read description", path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("description {}: {e}", path.display())))
}

/// One event, one line, flushed at once (a runtime reads them as they come).
/// A reader that went away does not stop the watch.
fn print_event(event: &crate::watch::Event) {
    use std::io::Write;
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}
