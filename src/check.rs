//! Check: is every object of an attachment still there and wired as recorded?

use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::kernel::runtime::block_on;
use crate::state::{Phase, SandboxId, StateDir};
use crate::teardown;

/// Check sandbox `id`: `Ok(())` when every recorded object exists and is
/// wired as recorded; [`Error::CheckFailed`] lists every problem found, and
/// [`Error::NotFound`] says there is no checkpoint.
pub fn check(id: &SandboxId, state: &StateDir) -> Result<()> {
    state.locked(id, || check_locked(id, state))
}

fn check_locked(id: &SandboxId, state: &StateDir) -> Result<()> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    let fail = |problems: Vec<String>| Error::CheckFailed {
        id: id.to_string(),
        problems: problems.join("; "),
    };
    if cp.phase != Phase::Complete {
        return Err(fail(vec![
            "attach did not finish (run detach, then attach again)".into(),
        ]));
    }
    let ns = match teardown::open_recorded(&cp, &state.file(id), &[]) {
        Ok(Ok(ns)) => ns,
        Ok(Err(why)) => return Err(fail(vec![why])),
        // Cannot look (permission, fd limit, ...): that error's own exit code.
        Err(e) => return Err(e),
    };
    let problems = block_on(async {
        let nl = Netlink::connect(&ns)?;
        if !cp.is_netns(ns.identity(), nl.cookie) {
            return Ok(vec![format!(
                "netns {} is now a different namespace (new netns cookie)",
                cp.netns.path
            )]);
        }
        teardown::missing(&nl, &cp.plan, &cp.created).await
    })?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(fail(problems))
    }
}
