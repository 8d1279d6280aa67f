//! The netns-wide tables of a description (routes, neighbours, rules). A
//! checkpoint leaves out the routes and rules, since their size is the
//! pod's routing table's, and keeps the neighbours (their number does not
//! grow with the routes). Commands that print a recorded description read
//! the tables live (`docs/attach.md`).

use std::hash::{Hash, Hasher};

use super::{Description, Neighbour, Route, Rule};

/// A description's routes, neighbours and policy rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tables {
    pub(crate) routes: Vec<Route>,
    pub(crate) neighbours: Vec<Neighbour>,
    pub(crate) rules: Vec<Rule>,
}

impl Description {
    /// Its tables, leaving it without them.
    pub(crate) fn take_tables(&mut self) -> Tables {
        Tables {
            routes: std::mem::take(&mut self.routes),
            neighbours: std::mem::take(&mut self.neighbours),
            rules: std::mem::take(&mut self.rules),
        }
    }

    /// Give it `tables` (in place of whatever it had).
    pub(crate) fn set_tables(&mut self, tables: Tables) {
        self.routes = tables.routes;
        self.neighbours = tables.neighbours;
        self.rules = tables.rules;
    }

    /// This description as a checkpoint recorded it, with the tables of
    /// `live` (the pod view of its netns now), a recorded neighbour in its
    /// recorded state (see [`Tables::with_recorded_neighbours`]).
    pub(crate) fn with_live_tables(mut self, mut live: Description) -> Description {
        let tables = live
            .take_tables()
            .with_recorded_neighbours(&self.neighbours);
        self.set_tables(tables);
        self
    }

    /// [`Tables::digest`] of its tables, read in place.
    pub(crate) fn tables_digest(&self) -> u64 {
        digest(&self.routes, &self.neighbours, &self.rules)
    }

    /// The copy a checkpoint records: without its routes and rules (made
    /// without copying them), with its neighbours.
    pub(crate) fn without_tables(&mut self) -> Description {
        let routes = std::mem::take(&mut self.routes);
        let rules = std::mem::take(&mut self.rules);
        let copy = self.clone();
        self.routes = routes;
        self.rules = rules;
        copy
    }
}

impl Tables {
    /// Without the routes and neighbours on the links named in `links`.
    pub(crate) fn without_links(mut self, links: &[&str]) -> Tables {
        if links.is_empty() {
            return self;
        }
        let ours = |name: &str| links.contains(&name);
        self.routes.retain(|r| {
            !r.interface.as_deref().is_some_and(ours)
                && !r.nexthops.iter().any(|h| ours(&h.interface))
        });
        self.neighbours.retain(|n| !ours(&n.interface));
        self
    }

    /// With each neighbour that `recorded` holds too (the same IP, MAC and
    /// interface) in its recorded state: a learned neighbour's state
    /// (reachable, stale, ...) changes all the time, and a repeated attach
    /// prints the same bytes while the pod's tables have not changed.
    pub(crate) fn with_recorded_neighbours(mut self, recorded: &[Neighbour]) -> Tables {
        for n in &mut self.neighbours {
            if let Some(was) = recorded
                .iter()
                .find(|r| (&r.ip, &r.mac, &r.interface) == (&n.ip, &n.mac, &n.interface))
            {
                n.state.clone_from(&was.state);
            }
        }
        self
    }

    /// A digest that tells whether the tables changed (`podtap watch`
    /// counts revisions by it): the same in every process on this machine;
    /// a neighbour's state (reachable, stale, ...), which changes all the
    /// time, is left out.
    pub(crate) fn digest(&self) -> u64 {
        digest(&self.routes, &self.neighbours, &self.rules)
    }
}

/// [`Tables::digest`] of the tables given by reference.
fn digest(routes: &[Route], neighbours: &[Neighbour], rules: &[Rule]) -> u64 {
    RoutesDigest::of(routes, rules).finish(neighbours)
}

/// The part of a tables digest that the routes and rules make (nearly all
/// of its work for a big routing table), so that it can be made apart from
/// the neighbours, which attach settles last.
#[derive(Debug)]
pub(crate) struct RoutesDigest(Fnv);

impl RoutesDigest {
    pub(crate) fn of(routes: &[Route], rules: &[Rule]) -> RoutesDigest {
        let mut h = Fnv::default();
        routes.hash(&mut h);
        rules.hash(&mut h);
        RoutesDigest(h)
    }

    /// The digest of the tables with `neighbours`.
    pub(crate) fn finish(self, neighbours: &[Neighbour]) -> u64 {
        let mut h = self.0;
        h.write_usize(neighbours.len());
        for n in neighbours {
            (&n.ip, &n.mac, &n.interface, n.gateway).hash(&mut h);
        }
        h.finish()
    }
}

/// FNV-1a over 8-byte words: fixed, fast, no random key.
#[derive(Debug)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.0 = (self.0 ^ u64::from_le_bytes(word)).wrapping_mul(0x0100_0000_01b3);
        }
        for b in chunks.remainder() {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> Description {
        let mut d = crate::render::samples::pod();
        let tap = d.attached().next().map(|(_, t)| t.name.clone()).unwrap();
        let mut own = d.routes[0].clone();
        own.interface = Some(tap);
        d.routes.push(own);
        d
    }

    #[test]
    fn a_copy_without_tables_keeps_neighbours_and_leaves_the_original_whole() {
        let mut d = desc();
        let before = d.clone();
        let bare = d.without_tables();
        assert_eq!(d, before);
        assert!(bare.routes.is_empty() && bare.rules.is_empty());
        assert_eq!(bare.neighbours, before.neighbours);
        assert_eq!(bare.interfaces, before.interfaces);
    }

    #[test]
    fn links_lose_their_routes() {
        let mut d = desc();
        let n = d.routes.len();
        let tap = d.attached().next().map(|(_, t)| t.name.clone()).unwrap();
        let t = d.take_tables().without_links(&[tap.as_str()]);
        assert_eq!(t.routes.len(), n - 1);
    }

    #[test]
    fn a_recorded_neighbour_keeps_its_recorded_state() {
        let mut d = desc();
        let recorded = d.neighbours.clone();
        let mut live = d.take_tables();
        for n in &mut live.neighbours {
            n.state = "stale".into();
        }
        let shown = live.with_recorded_neighbours(&recorded);
        assert_eq!(shown.neighbours, recorded);
    }

    #[test]
    fn the_digest_sees_routes_and_not_neighbour_states() {
        let mut d = desc();
        let t = d.take_tables();
        let mut stale = t.clone();
        if let Some(n) = stale.neighbours.first_mut() {
            n.state = "stale".into();
        }
        assert_eq!(t.digest(), stale.digest());
        let mut more = t.clone();
        more.routes[0].metric += 1;
        assert_ne!(t.digest(), more.digest());
        assert_eq!(t.digest(), t.clone().digest(), "stable");
    }

    /// Checkpoints keep the digest across podtap versions: its value for
    /// the sample pod is fixed, and made in two parts it is the same.
    #[test]
    fn the_digest_is_the_one_checkpoints_recorded() {
        let t = crate::render::samples::pod().take_tables();
        let parts = RoutesDigest::of(&t.routes, &t.rules).finish(&t.neighbours);
        assert_eq!(parts, t.digest());
        assert_eq!(t.digest(), 3_218_816_531_964_781_620);
    }
}
