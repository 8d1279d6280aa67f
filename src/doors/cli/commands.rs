//! One handler per subcommand.

use crate::error::{exit, Error, Result};
use crate::model::{Description, Wiring};
use crate::plan::{AttachOptions, TapOwner};
use crate::state::{SandboxId, StateDir};

use super::Command;
use crate::doors::output::{emit, emit_text};

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
            state,
            allow_host_netns,
            output,
        } => {
            let id: SandboxId = id.parse()?;
            let mut opts = AttachOptions {
                mode: mode.parse::<Wiring>()?,
                queues,
                vnet_hdr: !no_vnet_hdr,
                interfaces,
                ..AttachOptions::default()
            };
            if let Some(owner) = tap_owner.as_deref() {
                let owner: TapOwner = owner
                    .parse()
                    .map_err(|e| Error::Invalid(format!("--tap-owner {e}")))?;
                opts = opts.with_tap_owner(owner);
            }
            let desc =
                crate::attach::attach_in(&netns, allow_host_netns, &id, &opts, &state.dir())?;
            emit(&desc, output.as_deref())?;
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
                crate::detach::detach(&id, &state)?
            };
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
        Command::List { state, json } => list(&state.dir(), json)?,
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
            state,
            argv,
        } => {
            return crate::doors::exec::exec(
                &id.parse()?,
                &state.dir(),
                vmm,
                vhost,
                enter_netns,
                &argv,
            );
        }
        Command::OciHook { action, args } => return crate::doors::oci_hook::run(&action, &args),
        Command::Demo { keep, boot } => crate::doors::demo::run(keep, boot)?,
    }
    Ok(exit::OK)
}

fn read_description(path: &std::path::Path) -> Result<Description> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read description", path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("description {}: {e}", path.display())))
}

fn list(state: &StateDir, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for id in state.ids()? {
        let row = match state.load(&id) {
            Ok(Some(cp)) => serde_json::json!({
                "id": id,
                "netns": cp.netns.path,
                "inode": cp.netns.inode,
                "phase": cp.phase,
                "mode": cp.plan.mode,
                "taps": cp.plan.nics.iter().map(|n| n.tap.name.clone()).collect::<Vec<_>>(),
            }),
            Ok(None) => continue,
            Err(e) => serde_json::json!({ "id": id, "error": e.to_string() }),
        };
        rows.push(row);
    }
    if json {
        let text =
            serde_json::to_string_pretty(&rows).map_err(|e| Error::Invalid(e.to_string()))?;
        return emit_text(&(text + "\n"), None);
    }
    let mut out = String::from("ID\tPHASE\tMODE\tNETNS\tTAPS\n");
    for r in rows {
        let s = |k: &str| {
            r.get(k).map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
        };
        let taps = r.get("taps").and_then(|t| t.as_array()).map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(",")
        });
        match s("error") {
            Some(err) => out.push_str(&format!(
                "{}\tcorrupt\t-\t-\t{err}\n",
                s("id").unwrap_or_default()
            )),
            None => out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\n",
                s("id").unwrap_or_default(),
                s("phase").unwrap_or_default(),
                s("mode").unwrap_or_default(),
                s("netns").unwrap_or_default(),
                taps.unwrap_or_default()
            )),
        }
    }
    emit_text(&out, None)
}
