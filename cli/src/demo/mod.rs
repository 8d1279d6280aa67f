//! `podtap demo`: the main job on a throwaway pod, end to end.

mod guest;
mod ping;
mod pod;

use std::path::Path;
use std::time::Duration;

use crate::demo::pod::DemoPod;
use crate::error::Result;
use podtap::attach::AttachOptions;
use podtap::model::Description;
use podtap::scan::ScanOptions;
use podtap::state::{SandboxId, StateDir};

/// Build a demo pod, attach, print the description and a QEMU command line,
/// boot the test guest on the TAP where QEMU and the guest are at hand
/// (`boot`), detach, clean up.
pub fn run(keep: bool, boot: bool) -> Result<()> {
    let tag = format!("podtap-demo-{}", std::process::id());
    let demo = DemoPod::create(&tag)?;
    let state = StateDir::new(std::env::temp_dir().join(&tag));
    let id = SandboxId::new(tag.clone())?;
    eprintln!(
        "podtap demo: pod netns {} (eth0 {} / {}), peer netns {}",
        demo.pod.path().display(),
        crate::demo::pod::DEMO_POD_V4,
        crate::demo::pod::DEMO_POD_V6,
        demo.peer.path().display()
    );
    let guest = if boot { guest::find() } else { None };

    // Compare settled state with settled state: a boot takes seconds, long
    // enough for the kernel's link-local addresses to appear and leave DAD.
    let before = settled_scan(demo.pod.path())?;
    eprintln!(
        "podtap demo: scanned {} interface(s), {} route(s)",
        before.interfaces.len(),
        before.routes.len()
    );
    // A booted guest configures itself from podtap's answers (DHCP, RA).
    let opts = AttachOptions {
        serve: guest.is_some(),
        ..AttachOptions::default()
    };
    let desc = podtap::attach::attach(demo.pod.path(), &id, &opts, &state)?.description;
    crate::output::emit(&desc, None)?;
    print_qemu_command(demo.pod.path(), &desc);
    let guest_problem = guest.and_then(|g| g.boot(&id, &state, demo.peer.path()));
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
    let report = podtap::detach::detach(&id, &state, None)?;
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
    match podtap::render::render(podtap::render::Format::Qemu, desc) {
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
    let after = podtap::scan::scan(pod, &ScanOptions::default())?;
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
    if problems.is_empty() {
        return Ok(());
    }
    Err(podtap::error::Error::CheckFailed {
        id: id.to_string(),
        problems,
    }
    .into())
}

/// Scan once the pod's links have carrier and no address is tentative any
/// more (DAD done), or after 5 s. A veth whose peer is not up yet
/// (LOWERLAYERDOWN) has no IPv6 link-local address yet: it gets one later,
/// and a comparison with a scan from before would see a change podtap did not make.
fn settled_scan(pod: &Path) -> Result<Description> {
    for _ in 0..50 {
        let desc = podtap::scan::scan(pod, &ScanOptions::default())?;
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
    Ok(podtap::scan::scan(pod, &ScanOptions::default())?)
}
