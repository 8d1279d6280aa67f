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
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use crate::doors::beneath::Dir;
use crate::doors::pod_policy::{NodeSettings, PodAsk, PodPolicy, Refused};
use crate::doors::state_args::StateArgs;
use crate::error::{exit, Error, Result};
use crate::model::Wiring;
use crate::plan::AttachOptions;
use crate::plan::{parse_queues, TapOwner};
use crate::state::{SandboxId, StateDir};

/// Annotation keys podtap reads.
pub mod annotation {
    pub const MODE: &str = "io.podtap.mode";
    pub const QUEUES: &str = "io.podtap.queues";
    pub const INTERFACES: &str = "io.podtap.interfaces";
    pub const OUTPUT: &str = "io.podtap.output";
    pub const TAP_OWNER: &str = "io.podtap.tap-owner";
}

/// Default description file name inside the bundle.
pub const DEFAULT_OUTPUT: &str = "podtap.json";

/// The OCI runtime state (runtime-spec `state`), as far as podtap reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub id: SandboxId,
    #[serde(default)]
    pub pid: Option<i64>,
    #[serde(default)]
    pub bundle: Option<PathBuf>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

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
    #[arg(long, value_delimiter = ',', value_name = "MODES", value_parser = ["tc", "bridge", "macvtap"])]
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
        }
    }
}

/// `podtap oci-hook attach|detach`: OCI state JSON on stdin.
pub fn run(action: &str, args: &OciHookArgs) -> Result<i32> {
    use crate::doors::stdin::{read_stdin, StdinError};
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

/// Parse and sanity-check the state JSON.
pub fn parse_state(text: &str) -> Result<State> {
    // The id is validated first, so a bad one is exit 7 whatever else is wrong.
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::Invalid(format!("oci-hook: invalid OCI state on stdin: {e}")))?;
    if let Some(id) = value.get("id").and_then(serde_json::Value::as_str) {
        SandboxId::new(id)?;
    }
    serde_json::from_value(value)
        .map_err(|e| Error::Invalid(format!("oci-hook: invalid OCI state on stdin: {e}")))
}

fn attach(state: &State, args: &OciHookArgs, dir: &StateDir) -> Result<i32> {
    let opts = options(&state.annotations, &args.policy())?;
    let flag_output = args.output.as_deref();
    // Open (and make) the output's directory before attaching, so a bad path
    // leaves nothing built; the file is written relative to that fd.
    let sink = output_target(state, flag_output)?.open()?;
    let netns = netns_path(state)?;
    let attached = crate::attach::attach_in(&netns, &state.id, &opts, dir)?;
    crate::doors::output::emit_attached_with(&attached, &state.id, dir, |text| sink.write(text))?;
    Ok(exit::OK)
}

fn detach(state: &State, dir: &StateDir) -> Result<i32> {
    let netns = bundle_netns(state).ok().flatten();
    let report = crate::detach::detach_for_teardown(&state.id, dir, netns.as_deref())?;
    for w in report.warnings {
        eprintln!("podtap: warning: {w}");
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
    };
    let asked = |key: &str| ann.contains_key(key);
    let ask = PodAsk {
        mode: asked(annotation::MODE).then_some(opts.mode),
        queues: asked(annotation::QUEUES).then_some(opts.queues),
        owner: opts.owner,
        group: opts.group,
    };
    policy.admit(&node, &ask).map_err(|refused| {
        let key = match refused {
            Refused::Mode(_) => annotation::MODE,
            Refused::Queues(_) => annotation::QUEUES,
            Refused::Owner(_) | Refused::Group(_) => annotation::TAP_OWNER,
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
    Ok(opts)
}

/// Where the description goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `rel` (plain names) beneath the bundle: from the annotation, or the default.
    Beneath {
        /// The bundle (the runtime names it).
        bundle: PathBuf,
        /// The path below it.
        rel: PathBuf,
    },
    /// `--output`: the node admin's choice, written by path.
    Flag(PathBuf),
}

/// An output opened for writing: its directory is already open.
pub enum Sink {
    /// A directory beneath the bundle and the file name in it.
    Beneath(Dir, OsString),
    /// `--output`.
    Flag(PathBuf),
}

impl Target {
    /// Open the directory the description goes to (making the missing ones).
    pub fn open(&self) -> Result<Sink> {
        match self {
            Target::Beneath { bundle, rel } => {
                let what = format!("annotation {}", annotation::OUTPUT);
                let (dir, name) = Dir::root(bundle, &what)?.parent_of(rel)?;
                Ok(Sink::Beneath(dir, name))
            }
            Target::Flag(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| Error::io("create description dir", parent, e))?;
                }
                Ok(Sink::Flag(path.clone()))
            }
        }
    }
}

impl Sink {
    /// Write the description atomically.
    fn write(&self, text: &str) -> Result<()> {
        match self {
            Sink::Beneath(dir, name) => dir.write_atomic(name, text.as_bytes(), 0o644).map(drop),
            Sink::Flag(path) => crate::state::write_atomic(path, text.as_bytes(), 0o644),
        }
    }
}

/// Where the description goes: the annotation (a path inside the bundle), else
/// `--output`, else `<bundle>/podtap.json`.
///
/// Annotations come from whoever creates the pod, so they may only name a
/// relative path of plain names below the bundle, which is then resolved by
/// the kernel beneath it ([`Dir`]): the hook runs as root.
pub fn output_target(state: &State, flag: Option<&Path>) -> Result<Target> {
    let bundle = || {
        state.bundle.clone().ok_or_else(|| {
            Error::Invalid(
                "oci-hook: the OCI state has no bundle to write the description to".into(),
            )
        })
    };
    if let Some(rel) = state.annotations.get(annotation::OUTPUT) {
        let p = Path::new(rel);
        let inside = !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(Error::Invalid(format!(
                "annotation {}={rel:?}: must be a relative path inside the bundle",
                annotation::OUTPUT
            )));
        }
        return Ok(Target::Beneath {
            bundle: bundle()?,
            rel: p.to_path_buf(),
        });
    }
    match flag {
        Some(p) => Ok(Target::Flag(p.to_path_buf())),
        None => Ok(Target::Beneath {
            bundle: bundle()?,
            rel: PathBuf::from(DEFAULT_OUTPUT),
        }),
    }
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
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn annotations_make_options() {
        let allow = PodPolicy {
            modes: vec![Wiring::Bridge],
            max_queues: Some(4),
            tap_owners: vec![1000],
            tap_groups: vec![100],
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
    fn output_stays_in_the_bundle() {
        let mut s = parse_state(r#"{"ociVersion":"1.0.2","id":"c1","bundle":"/b"}"#).unwrap();
        let beneath = |rel: &str| Target::Beneath {
            bundle: "/b".into(),
            rel: rel.into(),
        };
        assert_eq!(output_target(&s, None).unwrap(), beneath("podtap.json"));
        assert_eq!(
            output_target(&s, Some(Path::new("/x/d.json"))).unwrap(),
            Target::Flag("/x/d.json".into())
        );
        s.annotations = ann(&[(annotation::OUTPUT, "vm/net.json")]);
        assert_eq!(
            output_target(&s, Some(Path::new("/x/d.json"))).unwrap(),
            beneath("vm/net.json")
        );
        for bad in ["/etc/passwd", "../x", "a/../../x", ""] {
            s.annotations = ann(&[(annotation::OUTPUT, bad)]);
            assert!(output_target(&s, None).is_err(), "{bad}");
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
