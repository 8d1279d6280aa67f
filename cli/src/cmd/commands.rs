//! One handler per subcommand.

use std::path::Path;

use crate::error::{exit, Error, Result};
use podtap::attach::{AttachOptions, TapOwner};
use podtap::model::{Description, Dns, Wiring};
use podtap::render::Format;
use podtap::state::{SandboxId, StateDir};

use super::args::{AttachArgs, CniInstallArgs, DetachArgs, ExecArgs, RenderArgs, WatchArgs};
use super::Command;
use crate::output::{check_output, emit, emit_attached, emit_text};
use crate::state_args::StateArgs;
use podtap::state::Registry;

/// Run the parsed command line: each subcommand is one function below.
pub fn dispatch(cli: super::Cli) -> Result<i32> {
    // The node's bound on a dump of the pod's tables: detach reads none,
    // and a bad value must not stop a teardown; the OCI hook reads it
    // where it attaches.
    let limit = match cli.command {
        Command::Detach(_) | Command::OciHook { .. } => podtap::attach::TABLE_ANSWER_LIMIT,
        _ => crate::table_limit::from_env()?,
    };
    match cli.command {
        Command::Scan {
            netns,
            allow_host_netns,
            output,
        } => {
            let opts = podtap::scan::ScanOptions {
                allow_host_netns,
                table_answer_limit: limit,
            };
            scan(&netns, &opts, output.as_deref())
        }
        Command::Attach(args) => attach(args, limit),
        Command::Detach(args) => detach(args),
        Command::Check { id, state } => check(&id, &state),
        Command::List { state, json } => list(&state, json),
        Command::Render(args) => render(args, limit),
        Command::Exec(args) => exec(args),
        Command::Watch(args) => watch(args, limit),
        Command::Serve { state } => serve(&state, limit),
        Command::OciHook { action, args } => crate::oci_hook::run(&action, &args),
        Command::CniInstall(args) => cni_install(args),
        Command::Demo { keep, no_boot, .. } => demo(keep, !no_boot),
        Command::Ops(op) => super::ops::run(op),
    }
}

fn scan(netns: &Path, opts: &podtap::scan::ScanOptions, output: Option<&Path>) -> Result<i32> {
    if let Some(path) = output {
        check_output(path)?;
    }
    let desc = podtap::scan::scan(netns, opts)?;
    emit(&desc, output)?;
    exiting(desc);
    Ok(exit::OK)
}

/// Leave `value` to the process's exit, which is next: freeing a
/// description of 100 000 routes is hundreds of thousands of `free` calls.
fn exiting<T>(value: T) {
    std::mem::forget(value);
}

fn attach(args: AttachArgs, table_answer_limit: usize) -> Result<i32> {
    let id: SandboxId = args.id.parse()?;
    let nics = args
        .nics
        .iter()
        .map(|spec| crate::nic_spec::parse_flag(spec))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|why| Error::Invalid(format!("--nic {why}")))?;
    let mut opts = AttachOptions {
        mode: args.mode.parse::<Wiring>()?,
        queues: args.queues,
        vnet_hdr: !args.no_vnet_hdr,
        interfaces: args.interfaces,
        dns: args.dns_from.as_deref().map(read_resolv_conf).transpose()?,
        nics,
        serve: args.serve,
        table_answer_limit,
        ..AttachOptions::default()
    };
    if let Some(owner) = args.tap_owner.as_deref() {
        let owner: TapOwner = owner
            .parse()
            .map_err(|e| Error::Invalid(format!("--tap-owner {e}")))?;
        opts = opts.with_tap_owner(owner);
    }
    if let Some(path) = args.output.as_deref() {
        check_output(path)?;
    }
    let state = args.state.dir();
    let attached = podtap::attach::attach(&args.netns, &id, &opts, &state)?;
    warn_unserved(&attached, &state);
    emit_attached(&attached, args.output.as_deref(), &id, &state)?;
    exiting(attached);
    Ok(exit::OK)
}

/// Say so when served NICs found no `podtap serve` to take their sockets.
pub(crate) fn warn_unserved(attached: &podtap::attach::Attached, state: &podtap::state::StateDir) {
    if attached.handed_over == Some(false) {
        eprintln!(
            "podtap: warning: no podtap serve took the served TAPs' sockets (state dir {}): \
             their guests are answered once one runs there, or under podtap watch --serve",
            state.path().display()
        );
    }
}

fn detach(args: DetachArgs) -> Result<i32> {
    let id: SandboxId = args.id.parse()?;
    let state = args.state.dir();
    let netns = args.netns.as_deref();
    let report = if args.force {
        podtap::detach::force_detach(&id, &state, netns)?
    } else {
        podtap::detach::detach(&id, &state, netns)?
    };
    // An attachment made through CNI is recorded there too: detached is detached.
    Registry::new(state.path()).forget(&id)?;
    if !report.found {
        eprintln!("podtap: sandbox {id}: nothing to detach");
    }
    for w in report.warnings {
        eprintln!("podtap: warning: {}", crate::terminal::one_line(&w));
    }
    Ok(exit::OK)
}

fn check(id: &str, state: &StateArgs) -> Result<i32> {
    podtap::check::check(&id.parse()?, &state.dir())?;
    println!("sandbox {id}: ok");
    Ok(exit::OK)
}

fn list(state: &StateArgs, json: bool) -> Result<i32> {
    super::list::list(&state.dir(), json)?;
    Ok(exit::OK)
}

fn render(args: RenderArgs, table_answer_limit: usize) -> Result<i32> {
    let desc = match (args.id, args.description) {
        (Some(id), _) => recorded(
            &args.state.dir(),
            &id.parse()?,
            args.format,
            table_answer_limit,
        )?,
        (None, Some(path)) => read_description(&path)?,
        (None, None) => return Err(Error::Invalid("render needs --id or --description".into())),
    };
    let mut text = podtap::render::render(args.format, &desc)?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    emit_text(&text, None)?;
    Ok(exit::OK)
}

/// The description attach recorded for `id`. The checkpoint leaves out
/// the routes and rules: a format that reads the tables gets them from the
/// recorded netns as they are now ([`StateDir::description_live`]).
fn recorded(
    state: &StateDir,
    id: &SandboxId,
    format: Format,
    table_answer_limit: usize,
) -> Result<Description> {
    let desc = if format.reads_tables() {
        state.description_live(id, table_answer_limit)
    } else {
        state.description(id)
    };
    Ok(desc?)
}

fn exec(args: ExecArgs) -> Result<i32> {
    let user = args.user.map(|u| u.parse()).transpose()?;
    crate::exec::exec(
        &args.id.parse()?,
        &args.state.dir(),
        (args.vmm, args.vhost, args.enter_netns),
        user,
        &args.argv,
    )
}

fn watch(args: WatchArgs, table_answer_limit: usize) -> Result<i32> {
    if args.qmp.is_some() && args.cloud_hypervisor_api.is_some() {
        return Err(Error::Invalid(
            "watch: give --qmp or --cloud-hypervisor-api, not both".into(),
        ));
    }
    let opts = podtap::watch::WatchOptions {
        qmp: args.qmp,
        cloud_hypervisor_api: args.cloud_hypervisor_api,
        vmm_uid: args.vmm_uid,
        serve: args.serve,
        table_answer_limit,
    };
    let id = args.id.parse()?;
    let signals = super::stop_signals::StopSignals::block()?;
    let result = podtap::watch::watch(&id, &args.state.dir(), &opts, &signals, &mut |event| {
        print_event(event)
    });
    signals.restore();
    result?;
    Ok(exit::OK)
}

fn serve(state: &StateArgs, table_answer_limit: usize) -> Result<i32> {
    let opts = podtap::serve::DaemonOptions {
        only: None,
        control: true,
        table_answer_limit,
    };
    let signals = super::stop_signals::StopSignals::block()?;
    // The event lines go out on a thread of their own, through a bounded
    // queue: a reader of stdout that stalls (a wedged log collector) must
    // not stop the guests' answers. A line that finds the queue full is
    // dropped, and the count of dropped lines goes to the log.
    let (lines, out) = std::sync::mpsc::sync_channel::<String>(EVENT_QUEUE);
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut stdout = std::io::stdout();
        for line in out {
            if writeln!(stdout, "{line}")
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
        }
    });
    let mut dropped = 0u64;
    let result = podtap::serve::daemon(&state.dir(), &opts, &signals, &mut |event| {
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        if lines.try_send(line).is_err() {
            dropped += 1;
            tracing::warn!(
                dropped,
                "serve: stdout is not being read; an event line was dropped"
            );
        }
    });
    // What is queued goes out, unless stdout stays blocked for a second.
    drop(lines);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !writer.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    signals.restore();
    result?;
    Ok(exit::OK)
}

/// How many event lines `podtap serve` holds for a slow reader of stdout.
const EVENT_QUEUE: usize = 4096;

fn cni_install(args: CniInstallArgs) -> Result<i32> {
    use crate::cni_install;
    let action = match (args.uninstall, args.wait) {
        (true, wait) => cni_install::Action::Uninstall { wait },
        (false, false) => cni_install::Action::Install,
        (false, true) => cni_install::Action::InstallAndWait {
            sweep_every: std::time::Duration::from_secs(args.sweep_every),
        },
    };
    let mut entry = cni_install::plugin_entry(&args.plugin_state_dir, &args.mode);
    if args.serve {
        if let Some(o) = entry.as_object_mut() {
            o.insert("serve".into(), serde_json::Value::Bool(true));
        }
    }
    if let Some(policy) = &args.pod_policy {
        entry = cni_install::with_pod_policy(entry, policy)?;
    }
    cni_install::run(action, &args.conf_dir, &args.bin_dir, &entry)?;
    Ok(exit::OK)
}

fn demo(keep: bool, boot: bool) -> Result<i32> {
    crate::demo::run(keep, boot)?;
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
fn print_event(event: &podtap::watch::Event) {
    use std::io::Write;
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}
