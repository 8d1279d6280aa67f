//! Where the OCI hook writes the description: beneath the bundle (the
//! `io.podtap.output` annotation, or `podtap.json`), resolved by the kernel
//! ([`Dir`]), or where `--output` says.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::beneath::Dir;
use crate::error::{Error, Result};
use crate::hook_state::{annotation, State};

/// Default description file name inside the bundle.
pub const DEFAULT_OUTPUT: &str = "podtap.json";

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
                let what = if rel.as_os_str() == DEFAULT_OUTPUT {
                    "oci-hook: description".to_string()
                } else {
                    format!("annotation {}", annotation::OUTPUT)
                };
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
    pub fn write(&self, text: &str) -> Result<()> {
        match self {
            Sink::Beneath(dir, name) => dir.write_atomic(name, text.as_bytes(), 0o644).map(drop),
            Sink::Flag(path) => Ok(podtap::state::write_atomic(path, text.as_bytes(), 0o644)?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook_state::parse_state;
    use crate::hook_state::tests::ann;

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
}
