//! The netns-wide tables of a description (routes, neighbours, rules): what
//! a checkpoint leaves out, since their size is the pod's routing table's.
//! Commands that print a recorded description read them live (`docs/attach.md`).

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

    /// A copy without its tables, made without copying them.
    pub(crate) fn without_tables(&mut self) -> Description {
        let tables = self.take_tables();
        let copy = self.clone();
        self.set_tables(tables);
        copy
    }

    /// The names of the links podtap built for it (TAPs, bridges): their
    /// routes and neighbours are no part of the pod's tables.
    pub(crate) fn own_links(&self) -> Vec<&str> {
        self.interfaces
            .iter()
            .flat_map(|i| {
                let tap = i.tap.as_ref().map(|t| t.name.as_str());
                tap.into_iter()
                    .chain(i.bridge.as_ref().map(|b| b.name.as_str()))
            })
            .collect()
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

    /// A digest that tells whether the tables changed (`podtap watch`
    /// counts revisions by it): the same in every process on this machine;
    /// a neighbour's state (reachable, stale, ...), which changes all the
    /// time, is left out.
    pub(crate) fn digest(&self) -> u64 {
        let mut h = Fnv::default();
        self.routes.hash(&mut h);
        self.rules.hash(&mut h);
        h.write_usize(self.neighbours.len());
        for n in &self.neighbours {
            (&n.ip, &n.mac, &n.interface, n.gateway).hash(&mut h);
        }
        h.finish()
    }
}

/// FNV-1a over 8-byte words: fixed, fast, no random key.
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
        let mut d = crate::render::fixture::pod();
        let tap = d.attached().next().map(|(_, t)| t.name.clone()).unwrap();
        let mut own = d.routes[0].clone();
        own.interface = Some(tap);
        d.routes.push(own);
        d
    }

    #[test]
    fn a_copy_without_tables_leaves_the_original_whole() {
        let mut d = desc();
        let before = d.clone();
        let bare = d.without_tables();
        assert_eq!(d, before);
        assert!(bare.routes.is_empty() && bare.neighbours.is_empty() && bare.rules.is_empty());
        assert_eq!(bare.interfaces, before.interfaces);
    }

    #[test]
    fn own_links_lose_their_routes() {
        let mut d = desc();
        let n = d.routes.len();
        let own: Vec<String> = d.own_links().iter().map(|s| s.to_string()).collect();
        let own: Vec<&str> = own.iter().map(String::as_str).collect();
        let t = d.take_tables().without_links(&own);
        assert_eq!(t.routes.len(), n - 1);
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
}
