//! podtap as an OCI runtime hook: `createRuntime` attaches, `poststop` detaches.
//!
//! The runtime passes the container's state on stdin (`ociVersion`, `id`,
//! `status`, `pid`, `bundle`, `annotations`). The sandbox id is the container
//! id. The netns is the one the bundle's `config.json` names
//! (`linux.namespaces[type=network].path`): a pinned netns outlives the
//! container, so poststop can still find and remove the TAPs. Without one,
//! podtap uses `/proc/<pid>/ns/net` (the runtime's own netns, which dies with
//! the container and takes the TAPs with it). See `docs/integration.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{exit, Error, Result};
use crate::nic_spec::parse_queues;
use crate::pod_policy::{NodeSettings, PodAsk, PodPolicy, Refused};
use crate::state_args::StateArgs;
use podtap::attach::{AttachOptions, NicOptions, TapOwner};
use podtap::detach::LinkDeletion;
use podtap::model::Wiring;
use podtap::state::StateDir;

pub use crate::hook_state::{annotation, parse_state, State};

// Options of `podtap oci-hook` (annotations `io.podtap.*` override them). A plain
// comment: a doc comment would replace the subcommand's own `about`.
#[derive(Debug, Clone, clap::Args)]
pub struct OciHookArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// Write the description here when the annotation io.podtap.output (a path relative to
    /// the bundle) is absent; default <bundle>/podtap.json.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Wiring modes a pod may pick with io.podtap.mode besides tc (comma-separated; default: none).
    #[arg(long, value_delimiter = ',', value_name = "MODES", value_parser = podtap::model::Wiring::NAMES)]
    pub pod_modes: Vec<String>,
    /// Most queues a pod may ask for with io.podtap.queues (default: 1).
    #[arg(long, value_name = "N")]
    pub pod_max_queues: Option<u32>,
    /// uids a pod may name as TAP owner with io.podtap.tap-owner (comma-separated; default: none).
    #[arg(long, value_delimiter = ',', value_name = "UIDS")]
    pub pod_tap_owners: Vec<u32>,
    /// gids a pod may name as TAP group with io.podtap.tap-owner (comma-separated; default: none).
    #[arg(long, value_delimiter = ',', value_name = "GIDS")]
    pub pod_tap_groups: Vec<u32>,
    /// TAP names a pod may ask for with io.podtap.nic.IFNAME (comma-separated; default: none).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub pod_tap_names: Vec<String>,
    /// Let a pod choose its guest NICs' MACs with io.podtap.nic.IFNAME (default: never).
    #[arg(long)]
    pub pod_guest_macs: bool,
    /// Let a pod ask for its guests to be served (io.podtap.serve, or serve=yes in
    /// io.podtap.nic.IFNAME) by podtap serve (default: never).
    #[arg(long)]
    pub pod_serve: bool,
}

impl OciHookArgs {
    /// The node's pod policy these flags set (everything denied by default).
    pub fn policy(&self) -> PodPolicy {
        PodPolicy {
            modes: self
                .pod_modes
                .iter()
                .filter_map(|m| m.parse().ok())
                .collect(),
            max_queues: self.pod_max_queues,
            tap_owners: self.pod_tap_owners.clone(),
            tap_groups: self.pod_tap_groups.clone(),
            tap_names: self.pod_tap_names.clone(),
            guest_macs: self.pod_guest_macs,
            serve: self.pod_serve,
        }
    }
}

/// `podtap oci-hook attach|detach`: OCI state JSON on stdin.
pub fn run(action: &str, args: &OciHookArgs) -> Result<i32> {
    use crate::stdin::{read_stdin, StdinError};
    let text = read_stdin().map_err(|e| match e {
        StdinError::Io(e) => Error::io("read OCI state from", "stdin", e),
        other => Error::Invalid(format!("oci-hook: OCI state: {other}")),
    })?;
    let state = parse_state(&text)?;
    let dir = args.state.dir();
    match action {
        "attach" => attach(&state, args, &dir),
        "detach" => detach(&state, &dir),
        other => Err(Error::Invalid(format!(
            "oci-hook: unknown action {other:?} (expected attach or detach)"
        ))),
    }
}

fn attach(state: &State, args: &OciHookArgs, dir: &StateDir) -> Result<i32> {
    // The hook's environment is the node admin's.
    let mut opts = options(&state.annotations, &args.policy())?;
    opts.table_answer_limit = crate::table_limit::from_env()?;
    let flag_output = args.output.as_deref();
    // Open (and make) the output's directory before attaching, so a bad path
    // leaves nothing built; the file is written relative to that fd.
    let sink = crate::hook_output::output_target(state, flag_output)?.open()?;
    let netns = netns_path(state)?;
    let attached = podtap::attach::attach(&netns, &state.id, &opts, dir)?;
    crate::output::emit_attached_with(&attached, &state.id, dir, |text| sink.write(text))?;
    Ok(exit::OK)
}

fn detach(state: &State, dir: &StateDir) -> Result<i32> {
    let netns = bundle_netns(state).ok().flatten();
    let report =
        podtap::detach::detach_for_teardown(&state.id, dir, netns.as_deref(), LinkDeletion::Now)?;
    for w in report.warnings {
        eprintln!("podtap: warning: {}", crate::terminal::one_line(&w));
    }
    Ok(exit::OK)
}

/// Attach options from the `io.podtap.*` annotations, which must pass the
/// node's pod policy (against the defaults: tc, 1 queue, no TAP owner).
pub fn options(ann: &BTreeMap<String, String>, policy: &PodPolicy) -> Result<AttachOptions> {
    let opts = annotated_options(ann)?;
    let node = AttachOptions::default();
    let node = NodeSettings {
        mode: node.mode,
        queues: node.queues,
        owner: node.owner,
        group: node.group,
        serve: node.serve,
    };
    let asked = |key: &str| ann.contains_key(key);
    let ask = PodAsk {
        mode: asked(annotation::MODE).then_some(opts.mode),
        queues: asked(annotation::QUEUES).then_some(opts.queues),
        owner: opts.owner,
        group: opts.group,
        serve: asked(annotation::SERVE).then_some(opts.serve),
        nics: opts.nics.clone(),
    };
    policy.admit(&node, &ask).map_err(|refused| {
        let nic_key = |what: &dyn Fn(&NicOptions) -> bool| {
            let nic = opts.nics.iter().find(|n| what(n));
            nic.map_or_else(String::new, |n| {
                format!("{}{}", annotation::NIC_PREFIX, n.interface)
            })
        };
        let key = match &refused {
            Refused::Mode(_) => annotation::MODE.to_string(),
            Refused::Queues(q) if opts.queues != *q || !asked(annotation::QUEUES) => {
                nic_key(&|n| n.queues == Some(*q))
            }
            Refused::Queues(_) => annotation::QUEUES.to_string(),
            Refused::Owner(_) | Refused::Group(_) if asked(annotation::TAP_OWNER) => {
                annotation::TAP_OWNER.to_string()
            }
            Refused::Owner(_) | Refused::Group(_) => nic_key(&|n| n.owner.is_some()),
            Refused::TapName(name) => nic_key(&|n| n.tap_name.as_ref() == Some(name)),
            Refused::GuestMac(mac) => nic_key(&|n| n.guest_mac == Some(*mac)),
            Refused::Serve if asked(annotation::SERVE) => annotation::SERVE.to_string(),
            Refused::Serve => nic_key(&|n| n.serve == Some(true)),
        };
        Error::NotAllowed(format!(
            "annotation {key} asks for {}, which this node's pod policy does not allow \
             (podtap oci-hook {} in the hook's args)",
            refused.asked(),
            refused.keys().1
        ))
    })?;
    Ok(opts)
}

/// The options the annotations name, before the policy.
fn annotated_options(ann: &BTreeMap<String, String>) -> Result<AttachOptions> {
    let mut opts = AttachOptions::default();
    if let Some(mode) = ann.get(annotation::MODE) {
        opts.mode = mode
            .parse::<Wiring>()
            .map_err(|e| Error::Invalid(format!("annotation {}: {e}", annotation::MODE)))?;
    }
    if let Some(q) = ann.get(annotation::QUEUES) {
        opts.queues = parse_queues(q)
            .map_err(|e| Error::Invalid(format!("annotation {}: {e}", annotation::QUEUES)))?;
    }
    if let Some(list) = ann.get(annotation::INTERFACES) {
        let names: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Err(Error::Invalid(format!(
                "annotation {} is empty",
                annotation::INTERFACES
            )));
        }
        opts.interfaces = Some(names);
    }
    if let Some(owner) = ann.get(annotation::TAP_OWNER) {
        let owner: TapOwner = owner
            .parse()
            .map_err(|e| Error::Invalid(format!("annotation {}: {e}", annotation::TAP_OWNER)))?;
        opts = opts.with_tap_owner(owner);
    }
    if let Some(serve) = ann.get(annotation::SERVE) {
        opts.serve = crate::nic_spec::parse_yes_no(serve)
            .map_err(|e| Error::Invalid(format!("annotation {}: {e}", annotation::SERVE)))?;
    }
    for (key, spec) in ann {
        let Some(ifname) = key.strip_prefix(annotation::NIC_PREFIX) else {
            continue;
        };
        let nic = crate::nic_spec::parse(ifname, spec)
            .map_err(|why| Error::Invalid(format!("annotation {key}: {why}")))?;
        opts.nics.push(nic);
    }
    Ok(opts)
}

/// The netns to attach in: the bundle's network namespace path, else the pid's.
pub fn netns_path(state: &State) -> Result<PathBuf> {
    if let Some(path) = bundle_netns(state)? {
        return Ok(path);
    }
    match state.pid {
        Some(pid) if pid > 0 => Ok(PathBuf::from(format!("/proc/{pid}/ns/net"))),
        _ => Err(Error::Invalid(
            "oci-hook: no netns: the state has no pid and the bundle's config.json names no network namespace path"
                .into(),
        )),
    }
}

/// `linux.namespaces[type=network].path` from `<bundle>/config.json`, if any.
fn bundle_netns(state: &State) -> Result<Option<PathBuf>> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(default)]
        linux: Option<Linux>,
    }
    #[derive(Deserialize)]
    struct Linux {
        #[serde(default)]
        namespaces: Vec<Namespace>,
    }
    #[derive(Deserialize)]
    struct Namespace {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        path: Option<PathBuf>,
    }
    let Some(bundle) = &state.bundle else {
        return Ok(None);
    };
    let file = bundle.join("config.json");
    let text = match std::fs::File::open(&file) {
        Ok(f) => read_config(f, &file)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read bundle config", &file, e)),
    };
    let config: Config = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("oci-hook: {}: {e}", file.display())))?;
    Ok(config
        .linux
        .into_iter()
        .flat_map(|l| l.namespaces)
        .find(|n| n.kind == "network")
        .and_then(|n| n.path)
        .filter(|p| !p.as_os_str().is_empty()))
}

/// The most of the bundle's config.json podtap reads: the runtime writes it,
/// but with the pod's annotations and environment in it.
const CONFIG_CAP: u64 = 4 << 20;

fn read_config(f: std::fs::File, file: &Path) -> Result<String> {
    use crate::stdin::{read_capped, StdinError};
    read_capped(f, CONFIG_CAP).map_err(|e| match e {
        StdinError::Io(e) => Error::io("read bundle config", file, e),
        StdinError::TooLarge(cap) => Error::Invalid(format!(
            "oci-hook: {}: larger than {} MiB, the most podtap reads",
            file.display(),
            cap >> 20
        )),
        StdinError::NotUtf8 => {
            Error::Invalid(format!("oci-hook: {}: not UTF-8 text", file.display()))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::hook_state::tests::ann;

    #[test]
    fn annotations_make_options() {
        let allow = PodPolicy {
            modes: vec![Wiring::Bridge],
            max_queues: Some(4),
            tap_owners: vec![1000],
            tap_groups: vec![100],
            ..PodPolicy::default()
        };
        let asks = ann(&[
            (annotation::MODE, "bridge"),
            (annotation::QUEUES, "4"),
            (annotation::INTERFACES, "eth0, net1"),
            (annotation::TAP_OWNER, "1000:100"),
        ]);
        let o = options(&asks, &allow).unwrap();
        assert_eq!(o.mode, Wiring::Bridge);
        assert_eq!(o.queues, 4);
        assert_eq!(o.interfaces, Some(vec!["eth0".into(), "net1".into()]));
        assert_eq!((o.owner, o.group), (Some(1000), Some(100)));
        let deny = PodPolicy::default();
        assert_eq!(options(&ann(&[]), &deny).unwrap(), AttachOptions::default());
        // Under the default policy each privilege-granting annotation is refused (exit 6).
        for (key, value) in [
            (annotation::MODE, "bridge"),
            (annotation::QUEUES, "4"),
            (annotation::TAP_OWNER, "1000"),
            (annotation::TAP_OWNER, "0:0"),
        ] {
            let e = options(&ann(&[(key, value)]), &deny).unwrap_err();
            assert_eq!(e.exit_code(), exit::PERMISSION, "{key}={value}");
            assert!(
                e.to_string()
                    .starts_with(&format!("annotation {key} asks for")),
                "{e}"
            );
        }
        // What the node would do anyway is no privilege.
        let same = ann(&[(annotation::MODE, "tc"), (annotation::QUEUES, "1")]);
        assert!(options(&same, &deny).is_ok());
        for bad in [
            (annotation::MODE, "vepa"),
            (annotation::QUEUES, "0"),
            (annotation::QUEUES, "x"),
            (annotation::INTERFACES, " , "),
            (annotation::TAP_OWNER, "bob"),
        ] {
            assert!(options(&ann(&[bad]), &allow).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn state_parsing() {
        assert!(parse_state("{").is_err());
        assert!(parse_state(r#"{"ociVersion":"1.0.2"}"#).is_err());
        assert!(parse_state(r#"{"id":"../x"}"#).is_err());
        let s = parse_state(r#"{"ociVersion":"1.0.2","id":"c","pid":42}"#).unwrap();
        assert_eq!(netns_path(&s).unwrap(), PathBuf::from("/proc/42/ns/net"));
        let s = parse_state(r#"{"id":"c","pid":0}"#).unwrap();
        assert!(netns_path(&s).is_err());
    }
}
