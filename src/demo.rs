//! `podtap demo`: the main job on a throwaway pod, end to end.

use crate::checkpoint::StateDir;
use crate::error::Result;
use crate::fixture::DemoPod;
use crate::netns::NetNs;
use crate::plan::AttachOptions;

/// Build a demo pod, attach, print the description and a QEMU command line, detach, clean up.
pub fn run(keep: bool, _boot: bool) -> Result<()> {
    let tag = format!("podtap-demo-{}", std::process::id());
    let demo = DemoPod::create(&tag)?;
    let state = StateDir::new(std::env::temp_dir().join(&tag));
    let id = tag.clone();
    eprintln!(
        "podtap demo: pod netns {} (eth0 {} / {}), peer netns {}",
        demo.pod.path().display(),
        crate::fixture::DEMO_POD_V4,
        crate::fixture::DEMO_POD_V6,
        demo.peer.path().display()
    );

    let before = crate::scan::scan(&NetNs::open(demo.pod.path(), false)?)?;
    eprintln!(
        "podtap demo: scanned {} interface(s), {} route(s)",
        before.interfaces.len(),
        before.routes.len()
    );
    let desc = crate::attach::attach(
        demo.pod.path(),
        false,
        &id,
        &AttachOptions::default(),
        &state,
    )?;
    crate::cli::emit(&desc, None)?;
    match crate::render::render(crate::render::Format::Qemu, &desc) {
        Ok(args) => {
            let args: Vec<&str> = args.lines().collect();
            println!(
                "\n# boot a VM on these TAPs (run inside the pod netns):\nip netns exec {} qemu-system-x86_64 -accel tcg -m 256 -nographic -kernel VMLINUZ -initrd INITRD {}",
                demo.pod.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                args.join(" ")
            );
        }
        Err(e) => eprintln!("podtap demo: qemu render: {e}"),
    }
    if keep {
        eprintln!(
            "podtap demo: --keep: leaving {} and {} attached (sandbox id {id}, state dir {})",
            demo.pod.path().display(),
            demo.peer.path().display(),
            state.path().display()
        );
        std::mem::forget(demo);
        return Ok(());
    }
    let report = crate::detach::detach(&id, &state, false, None)?;
    for w in report.warnings {
        eprintln!("podtap demo: warning: {w}");
    }
    let after = crate::scan::scan(&NetNs::open(demo.pod.path(), false)?)?;
    let same = before.interfaces == after.interfaces && before.routes == after.routes;
    eprintln!(
        "podtap demo: detached; pod netns {} as before",
        if same { "is exactly" } else { "is NOT" }
    );
    let _ = std::fs::remove_dir_all(state.path());
    Ok(())
}
