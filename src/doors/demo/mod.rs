//! `podtap demo`: the main job on a throwaway pod, end to end.

mod pod;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::doors::demo::pod::DemoPod;
use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::model::Description;
use crate::plan::AttachOptions;
use crate::state::{SandboxId, StateDir};

/// Build a demo pod, attach, print the description and a QEMU command line,
/// optionally boot the test guest on the TAP (`boot`), detach, clean up.
pub fn run(keep: bool, boot: bool) -> Result<()> {
    let tag = format!("podtap-demo-{}", std::process::id());
    let demo = DemoPod::create(&tag)?;
    let state = StateDir::new(std::env::temp_dir().join(&tag));
    let id = SandboxId::new(tag.clone())?;
    eprintln!(
        "podtap demo: pod netns {} (eth0 {} / {}), peer netns {}",
        demo.pod.path().display(),
        crate::doors::demo::pod::DEMO_POD_V4,
        crate::doors::demo::pod::DEMO_POD_V6,
        demo.peer.path().display()
    );

    let pod_ns = NetNs::open(demo.pod.path(), false)?;
    // Compare settled state with settled state: a boot takes seconds, long
    // enough for the kernel's link-local addresses to appear and leave DAD.
    let before = settled_scan(&pod_ns)?;
    eprintln!(
        "podtap demo: scanned {} interface(s), {} route(s)",
        before.interfaces.len(),
        before.routes.len()
    );
    let desc = crate::attach::attach(demo.pod.path(), &id, &AttachOptions::default(), &state)?;
    crate::doors::output::emit(&desc, None)?;
    print_qemu_command(demo.pod.path(), &desc);
    let guest_problem = if boot {
        boot_guest(id.as_str(), &desc)
    } else {
        None
    };
    if keep {
        eprintln!(
            "podtap demo: --keep: leaving {} and {} attached (sandbox id {id}, state dir {})",
            demo.pod.path().display(),
            demo.peer.path().display(),
            state.path().display()
        );
        std::mem::forget(demo);
        return outcome(&id, guest_problem.into_iter().collect());
    }
    let report = crate::detach::detach(&id, &state, None)?;
    for w in report.warnings {
        eprintln!("podtap demo: warning: {w}");
    }
    let same = restored(&before, demo.pod.path())?;
    let _ = std::fs::remove_dir_all(state.path());
    let problems = [
        guest_problem,
        (!same).then(|| "detach did not restore the pod netns".to_string()),
    ];
    outcome(&id, problems.into_iter().flatten().collect())
}

/// How to boot a VM on the demo's TAPs by hand (a QEMU command line).
fn print_qemu_command(pod: &Path, desc: &Description) {
    match crate::render::render(crate::render::Format::Qemu, desc) {
        Ok(args) => {
            let args: Vec<&str> = args.lines().collect();
            println!(
                "\n# boot a VM on these TAPs (run inside the pod netns):\nip netns exec {} qemu-system-x86_64 -accel tcg -m 256 -nographic -kernel VMLINUZ -initrd INITRD {}",
                pod.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                args.join(" ")
            );
        }
        Err(e) => eprintln!("podtap demo: qemu render: {e}"),
    }
}

/// Scan the pod again after detach and say whether it is as `before` was.
fn restored(before: &Description, pod: &Path) -> Result<bool> {
    let after = crate::scan::scan(pod, false)?;
    // DAD may finish between the two scans: that is the kernel, not podtap.
    let settled = |d: &Description| {
        let mut ifs = d.interfaces.clone();
        ifs.iter_mut()
            .flat_map(|i| i.address_details.iter_mut())
            .for_each(|a| a.tentative = false);
        ifs
    };
    let same = settled(before) == settled(&after) && before.routes == after.routes;
    eprintln!(
        "podtap demo: detached; pod netns {} as before",
        if same { "is exactly" } else { "is NOT" }
    );
    if !same {
        eprintln!(
            "podtap demo: before: {}\npodtap demo: after:  {}",
            serde_json::to_string(&(settled(before), &before.routes)).unwrap_or_default(),
            serde_json::to_string(&(settled(&after), &after.routes)).unwrap_or_default()
        );
    }
    Ok(same)
}

/// The demo's result: ok, or a failed check naming every problem.
fn outcome(id: &SandboxId, problems: Vec<String>) -> Result<()> {
    crate::check::verdict(id, problems)
}

/// Scan once the pod's links have carrier and no address is tentative any
/// more (DAD done), or after 5 s. A veth whose peer is not up yet
/// (LOWERLAYERDOWN) has no IPv6 link-local address yet: it gets one later,
/// and a comparison with a scan from before would see a change podtap did not make.
fn settled_scan(ns: &NetNs) -> Result<Description> {
    for _ in 0..50 {
        let desc = crate::scan::scan_ns(ns)?;
        let tentative = desc
            .interfaces
            .iter()
            .flat_map(|i| &i.address_details)
            .any(|a| a.tentative);
        let carrier = desc
            .interfaces
            .iter()
            .filter(|i| i.eligible)
            .all(|i| i.oper_state == "UP");
        if !tentative && carrier {
            return Ok(desc);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::scan::scan_ns(ns)
}

/// The QEMU binary `--boot` runs (`PODTAP_QEMU` overrides it).
const QEMU: &str = "qemu-system-x86_64";
/// Where tests/guest/build-guest.sh caches the guest by default.
const GUEST_CACHE: &str = "/var/cache/podtap-test-guest";
/// QEMU is killed if the guest has not powered off by then.
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// Boot the test guest on the demo pod's TAPs and print its result lines.
///
/// Returns a problem for the exit code when the guest booted but a ping
/// failed; missing QEMU or guest images only print why and skip the boot.
fn boot_guest(id: &str, desc: &Description) -> Option<String> {
    let qemu = std::env::var("PODTAP_QEMU").unwrap_or_else(|_| QEMU.to_string());
    let Some(qemu_path) = find_program(&qemu) else {
        eprintln!("podtap demo: --boot: {qemu} is not installed (Debian: apt-get install qemu-system-x86); not booting");
        return None;
    };
    let (kernel, initrd) = match guest_images() {
        Ok(images) => images,
        Err(why) => {
            eprintln!("podtap demo: --boot: {why}; not booting");
            return None;
        }
    };
    match run_guest(id, desc, &qemu_path, &kernel, &initrd) {
        Ok(results) => {
            let failed: Vec<&String> = results
                .iter()
                .filter(|l| l.starts_with("PODTAP-ERROR") || l.contains(" FAIL "))
                .collect();
            if !results.iter().any(|l| l == "PODTAP-DONE") {
                Some("the demo guest did not finish (see its output above)".into())
            } else if failed.is_empty() {
                eprintln!("podtap demo: the guest reached the peer through the TAP");
                None
            } else {
                Some(format!(
                    "the demo guest reported: {}",
                    failed
                        .iter()
                        .map(|l| l.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            }
        }
        Err(e) => Some(format!("booting the demo guest: {e}")),
    }
}

/// Kernel and initramfs: PODTAP_GUEST_KERNEL/PODTAP_GUEST_INITRD, else the
/// build-guest.sh cache (PODTAP_GUEST_CACHE or its default).
fn guest_images() -> std::result::Result<(PathBuf, PathBuf), String> {
    let (kernel, initrd) = match (
        std::env::var_os("PODTAP_GUEST_KERNEL"),
        std::env::var_os("PODTAP_GUEST_INITRD"),
    ) {
        (Some(k), Some(i)) => (PathBuf::from(k), PathBuf::from(i)),
        _ => {
            let cache = std::env::var_os("PODTAP_GUEST_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(GUEST_CACHE));
            (cache.join("vmlinuz"), cache.join("initramfs.gz"))
        }
    };
    for path in [&kernel, &initrd] {
        if !path.is_file() {
            return Err(format!(
                "no test guest at {} (build it with tests/guest/build-guest.sh, \
                 or set PODTAP_GUEST_KERNEL and PODTAP_GUEST_INITRD)",
                path.display()
            ));
        }
    }
    Ok((kernel, initrd))
}

/// `name` itself if it contains a `/`, else the first executable on PATH.
fn find_program(name: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return executable(&path).then_some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| executable(p))
    })
}

/// Start QEMU with the TAP fds (it runs in podtap's own netns, no `ip netns
/// exec`), echo the guest's `PODTAP-` lines, and return them.
fn run_guest(
    id: &str,
    desc: &Description,
    qemu: &Path,
    kernel: &Path,
    initrd: &Path,
) -> Result<Vec<String>> {
    let guest_args =
        crate::render::render(crate::render::Format::GuestArgs, desc).map_err(Error::Render)?;
    let append = format!(
        "console=ttyS0 quiet panic=-1 podtap.timeout=90 {} podtap.ping={},{}",
        guest_args.trim(),
        crate::doors::demo::pod::DEMO_PEER_V4,
        crate::doors::demo::pod::DEMO_PEER_V6
    );
    let handover =
        crate::doors::exec::open_handover(id, desc, crate::doors::exec::Vmm::Qemu, false)?;
    eprintln!(
        "podtap demo: booting the test guest under {} (TCG, about 10 s)...",
        qemu.display()
    );
    let mut child = Command::new(qemu)
        .args(["-accel", "tcg", "-m", "256", "-smp", "1"])
        .args(["-nographic", "-no-reboot"])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", &append])
        .args(&handover.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::io("run", qemu, e))?;
    // QEMU holds its own copies now.
    handover.close();

    let (done, wait_done) = mpsc::channel::<()>();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        if wait_done.recv_timeout(BOOT_TIMEOUT).is_err() {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    });
    let mut results = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let line = line.trim();
            if line.starts_with("PODTAP-") {
                println!("guest: {line}");
                results.push(line.to_string());
            }
        }
    }
    let _ = done.send(());
    let _ = watchdog.join();
    let status = child.wait().map_err(|e| Error::io("wait for", qemu, e))?;
    if !status.success() {
        eprintln!("podtap demo: {} exited with {status}", qemu.display());
    }
    Ok(results)
}
