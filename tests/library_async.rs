//! The library as Rust runtimes embed it: called from inside a tokio
//! runtime (multi-thread and current-thread), straight from a task and
//! through `spawn_blocking`, scan, attach, check, the live description and
//! detach work, and the pod netns ends as it was. (podtap once started a
//! tokio runtime of its own per call, which tokio refuses inside another:
//! a call from a task panicked.)

use podtap::attach::AttachOptions;
use podtap::state::{SandboxId, StateDir};
use podtap_testkit::{settled_snapshot, Pod, TempDir};

/// One attachment's whole life through the library, from an async task.
async fn lifecycle(pod: &Pod, state: &StateDir, id: &SandboxId) {
    let netns = pod.pod.path();
    let scanned = podtap::scan::scan(&netns, &Default::default()).expect("scan");
    assert!(scanned.interface("eth0").is_some());
    let desc = podtap::attach::attach(&netns, id, &AttachOptions::default(), state)
        .expect("attach")
        .description;
    let tap = desc
        .interface("eth0")
        .and_then(|i| i.tap.as_ref())
        .map(|t| t.name.clone())
        .expect("a TAP for eth0");
    assert!(pod.pod.ip("link show").contains(&tap));
    podtap::check::check(id, state).expect("check");
    let live = state
        .description_live(id, podtap::attach::TABLE_ANSWER_LIMIT)
        .expect("live description");
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

/// `watch` as a library call: it touches no signal state, and a
/// [`podtap::watch::Stopper`] pulled from another thread ends it.
#[test]
fn a_watch_stops_when_its_stopper_says_so() {
    if !podtap_testkit::root_or_skip("a_watch_stops_when_its_stopper_says_so") {
        return;
    }
    use podtap::watch::{Event, Stopper, WatchOptions};
    let pod = Pod::stable_dual_stack();
    let before = settled_snapshot(&pod.pod);
    let dir = TempDir::new();
    let state = StateDir::new(dir.path());
    let id: SandboxId = "watch-stopper".parse().expect("id");
    podtap::attach::attach(&pod.pod.path(), &id, &AttachOptions::default(), &state)
        .expect("attach");
    let stopper = Stopper::new().expect("stopper");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let events = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut events = Vec::new();
            let opts = WatchOptions::default();
            let result = podtap::watch::watch(&id, &state, &opts, &stopper, &mut |e| {
                if matches!(e, Event::Ready { .. }) {
                    let _ = ready_tx.send(());
                }
                events.push(serde_json::to_value(e).expect("event JSON"));
            });
            result.map(|()| events)
        });
        ready_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the watch is ready");
        stopper.stop();
        watcher.join().expect("watch thread")
    })
    .expect("the watch returns Ok when stopped");
    let last = events.last().expect("events");
    assert_eq!(last["signal"], "stopped", "{events:?}");
    podtap::detach::detach(&id, &state, None).expect("detach");
    assert_eq!(settled_snapshot(&pod.pod), before);
}
