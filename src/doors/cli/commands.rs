//! One handler per subcommand.

use crate::error::{exit, Error, Result};
use crate::model::{Description, Wiring};
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
            if let Some(path) = &output {
                check_output(path)?;
            }
            let state = state.dir();
            let attached = crate::attach::attach_in(&netns, allow_host_netns, &id, &opts, &state)?;
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
