//! A checkpoint as its JSON file holds it: a `phase` flag, and a
//! `description` present once the phase is "complete". The file's shape is
//! the one podtap has always written; [`Checkpoint`] holds the same as a
//! [`Stage`].

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::checkpoint::{Checkpoint, Created, Phase, Stage};
use crate::id::SandboxId;
use crate::model::NetnsRef;
use crate::plan::Plan;

/// The file's fields, in the file's order, as read.
#[derive(Deserialize)]
#[serde(bound(deserialize = "D: Deserialize<'de>"))]
struct Raw<D> {
    version: u32,
    id: SandboxId,
    netns: NetnsRef,
    #[serde(default)]
    netns_cookie: Option<u64>,
    phase: Phase,
    plan: Plan,
    #[serde(default)]
    created: Vec<Created>,
    #[serde(default)]
    description: Option<D>,
    #[serde(default)]
    tables_digest: Option<u64>,
    #[serde(default)]
    only: Option<Vec<String>>,
    #[serde(default)]
    late: Vec<String>,
    #[serde(default)]
    adopted: Vec<String>,
    #[serde(default)]
    pending: Vec<String>,
}

/// The same fields, borrowed, as written.
#[derive(Serialize)]
struct RawRef<'a, D> {
    version: u32,
    id: &'a SandboxId,
    netns: &'a NetnsRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    netns_cookie: Option<u64>,
    phase: Phase,
    plan: &'a Plan,
    created: &'a [Created],
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a D>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tables_digest: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    only: Option<&'a Vec<String>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    late: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    adopted: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pending: &'a [String],
}

impl<D: Serialize> Serialize for Checkpoint<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RawRef {
            version: self.version,
            id: &self.id,
            netns: &self.netns,
            netns_cookie: self.netns_cookie,
            phase: self.phase(),
            plan: &self.plan,
            created: &self.created,
            description: self.description(),
            tables_digest: self.tables_digest,
            only: self.only.as_ref(),
            late: &self.late,
            adopted: &self.adopted,
            pending: &self.pending,
        }
        .serialize(s)
    }
}

impl<'de, D: Deserialize<'de>> Deserialize<'de> for Checkpoint<D> {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        let raw = Raw::<D>::deserialize(d)?;
        let stage = match raw.phase {
            Phase::Complete => Stage::Complete(raw.description),
            // An intent has no description; one found there says nothing
            // (it is still parsed: a malformed one makes the file corrupt).
            Phase::Applying => Stage::Intent,
        };
        Ok(Checkpoint {
            version: raw.version,
            id: raw.id,
            netns: raw.netns,
            netns_cookie: raw.netns_cookie,
            stage,
            tables_digest: raw.tables_digest,
            plan: raw.plan,
            created: raw.created,
            only: raw.only,
            late: raw.late,
            adopted: raw.adopted,
            pending: raw.pending,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::model::Description;
    use crate::state::checkpoint::tests::sample;

    fn complete() -> Checkpoint {
        let mut cp = sample("s");
        cp.stage = Stage::Complete(Some(crate::render::samples::pod()));
        cp
    }

    #[test]
    fn the_file_keeps_its_shape_phase_and_description() {
        let v = serde_json::to_value(complete()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        // serde_json's map is sorted; the set of fields is what counts here.
        let mut want = vec![
            "version",
            "id",
            "netns",
            "netns_cookie",
            "phase",
            "plan",
            "created",
            "description",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["phase"], json!("complete"));
        let mut intent = sample("s");
        intent.stage = Stage::Intent;
        let intent = serde_json::to_value(intent).unwrap();
        assert_eq!(intent["phase"], json!("applying"));
        assert!(intent.get("description").is_none());
        // Written in the order the file always had.
        let text = serde_json::to_string(&complete()).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap();
        assert!(at("version") < at("netns_cookie") && at("netns_cookie") < at("phase"));
        assert!(at("phase") < at("plan") && at("created") < at("description"));
    }

    #[test]
    fn a_file_reads_back_as_written() {
        let text = serde_json::to_string(&complete()).unwrap();
        let back: Checkpoint = serde_json::from_str(&text).unwrap();
        assert_eq!(back.phase(), Phase::Complete);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn an_older_file_without_cookie_or_created_still_reads() {
        let mut v = serde_json::to_value(sample("s")).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.remove("netns_cookie");
        obj.remove("created");
        let cp: Checkpoint = serde_json::from_value(v).unwrap();
        assert_eq!(cp.phase(), Phase::Complete);
        assert!(cp.created.is_empty() && cp.netns_cookie.is_none());
    }

    #[test]
    fn complete_without_a_description_still_reads_without_one() {
        let v: Value = serde_json::to_value(sample("s")).unwrap();
        assert_eq!(v["phase"], json!("complete"));
        let cp = serde_json::from_value::<Checkpoint<Description>>(v).unwrap();
        assert_eq!(cp.phase(), Phase::Complete);
        assert!(cp.description().is_none());
    }
}
