//! The library as Rust runtimes embed it: called from inside a tokio
//! runtime (multi-thread and current-thread), straight from a task and
//! through `spawn_blocking`, scan, attach, check, the live description and
//! detach work, and the pod netns ends as it was. podtap's calls start a
//! runtime of their own, which tokio refuses inside another: they must move
//! off the caller's runtime thread rather than panic.

use podtap::attach::AttachOptions;
use podtap::state::{SandboxId, StateDir};
use podtap_testkit::{settled_snapshot, Pod, TempDir};

/// One attachment's whole life through the library, from an async task.
async fn lifecycle(pod: &Pod, state: &StateDir, id: &SandboxId) {
    let netns = pod.pod.path();
    let scanned = podtap::scan::scan(&netns, false).expect("scan");
    assert!(scanned.interface("eth0").is_some());
    let desc =
        podtap::attach::attach(&netns, id, &AttachOptions::default(), state).expect("attach");
    let tap = desc
        .interface("eth0")
        .and_then(|i| i.tap.as_ref())
        .map(|t| t.name.clone())
        .expect("a TAP for eth0");
    assert!(pod.pod.ip("link show").contains(&tap));
    podtap::check::check(id, state).expect("check");
    let live = state.description_live(id).expect("live description");
    assert_eq!(live.interfaces.len(), desc.interfaces.len());
    podtap::detach::detach(id, state, None).expect("detach");
}

fn runtimes() -> Vec<(&'static str, tokio::runtime::Runtime)> {
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("multi-thread runtime");
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("current-thread runtime");
    vec![("multi", multi), ("current", current)]
}

#[test]
fn the_library_works_inside_tokio_runtimes() {
    if !podtap_testkit::root_or_skip("the_library_works_inside_tokio_runtimes") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let before = settled_snapshot(&pod.pod);
    let dir = TempDir::new();
    let state = StateDir::new(dir.path());
    for (flavor, rt) in runtimes() {
        let id: SandboxId = format!("async-{flavor}").parse().expect("id");
        rt.block_on(lifecycle(&pod, &state, &id));
        assert_eq!(settled_snapshot(&pod.pod), before, "{flavor}: from a task");

        // The way the docs recommend: spawn_blocking keeps the workers free.
        let (netns, dir) = (pod.pod.path(), dir.path().to_path_buf());
        rt.block_on(async move {
            tokio::task::spawn_blocking(move || {
                let state = StateDir::new(dir);
                let id: SandboxId = "async-blocking".parse().expect("id");
                podtap::attach::attach(&netns, &id, &AttachOptions::default(), &state)?;
                podtap::detach::detach(&id, &state, None).map(drop)
            })
            .await
            .expect("join")
            .expect("attach and detach");
        });
        assert_eq!(
            settled_snapshot(&pod.pod),
            before,
            "{flavor}: spawn_blocking"
        );
    }
}
