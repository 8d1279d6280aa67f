//! What podtap does with its table: create it, read it back, check it,
//! delete it.

use nix::errno::Errno;

use super::attr::be32;
use super::conn::Nft;
use super::error::Error;
use super::model::Table;
use super::msg::{self, Dump};
use super::readback::{differences, parse_chain, parse_rule, parse_table, table_of, Found};
use super::sys::{nft_type, NFTA_GEN_ID, NFT_MSG_NEWCHAIN, NFT_MSG_NEWGEN, NFT_MSG_NEWRULE};

/// How many times a read or a deletion is tried while the ruleset changes
/// under it.
pub const ATTEMPTS: u32 = 8;

/// What [`Nft::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// No table of that name.
    Missing,
    /// The table, exactly as podtap made it (counters aside).
    Unchanged(Found),
    /// A table of that name with podtap's marker, changed since: each
    /// difference in a line.
    Altered(Found, Vec<String>),
    /// A table of that name without podtap's marker.
    Foreign(Found),
}

/// What [`Nft::delete`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted the table with this handle.
    Deleted(u64),
    /// There was no table of that name.
    Missing,
}

impl Nft {
    /// Create `table` in one batch: all of it, or (on any error) nothing.
    /// A table of that name already there fails it with `EEXIST` on
    /// [`msg::Op::NewTable`], and leaves that table as it was.
    pub fn create(&self, table: &Table) -> Result<(), Error> {
        let first = self.seqs(msg::create_len(table));
        self.run(&msg::create(table, first)?)
    }

    /// The ruleset's generation (`NFT_MSG_GETGEN`): it moves with every
    /// committed batch in the netns, whoever sent it.
    pub fn generation(&self) -> Result<u32, Error> {
        let seq = self.seqs(1);
        let mut generation = None;
        let end = self.request(&msg::get_generation(seq), seq, |f| {
            if f.kind == nft_type(NFT_MSG_NEWGEN) {
                generation = f
                    .attributes()
                    .find(|(k, _)| *k == NFTA_GEN_ID)
                    .and_then(|(_, v)| be32(v));
            }
            Ok(())
        })?;
        end.map_err(|(errno, message)| kernel("NFT_MSG_GETGEN", errno, message))?;
        generation.ok_or_else(|| Error::Protocol("NFT_MSG_NEWGEN without NFTA_GEN_ID".into()))
    }

    /// The inet table `name` with its chains and rules, all read in one
    /// generation (read again when the ruleset changed meanwhile); `None`
    /// when there is none.
    pub fn read(&self, name: &str) -> Result<Option<Found>, Error> {
        for _ in 0..ATTEMPTS {
            let generation = self.generation()?;
            let Some(mut found) = self.read_table(name, generation)? else {
                return Ok(None);
            };
            if found.res_id != generation.to_be_bytes()[2..] {
                // Read in another generation than the one asked before.
                continue;
            }
            let whole = self.read_contents(name, &mut found)?;
            if whole && self.generation()? == generation {
                return Ok(Some(found));
            }
        }
        Err(Error::Busy(ATTEMPTS))
    }

    fn read_table(&self, name: &str, generation: u32) -> Result<Option<Found>, Error> {
        let seq = self.seqs(1);
        let mut found = None;
        let end = self.request(&msg::get_table(name, seq)?, seq, |f| {
            found = parse_table(f, generation);
            Ok(())
        })?;
        match end {
            Err((Errno::ENOENT, _)) => Ok(None),
            Err((errno, message)) => Err(kernel("NFT_MSG_GETTABLE", errno, message)),
            Ok(()) => found
                .map(Some)
                .ok_or_else(|| Error::Protocol("a table answer without name or handle".into())),
        }
    }

    /// Dump `name`'s chains and rules into `found`; false when a dump was
    /// interrupted by a change.
    fn read_contents(&self, name: &str, found: &mut Found) -> Result<bool, Error> {
        let ours = |f: &super::attr::Frame<'_>| table_of(f) == Some(name.as_bytes());
        let seq = self.seqs(1);
        let mut chains = Vec::new();
        let (end, intr1) = self.dump(&msg::dump(Dump::Chains, name, seq)?, seq, |f| {
            if f.kind == nft_type(NFT_MSG_NEWCHAIN) && ours(f) {
                chains.push(parse_chain(f).ok_or_else(|| bad("chain"))?);
            }
            Ok(())
        })?;
        end.map_err(|e| kernel("NFT_MSG_GETCHAIN dump", e, None))?;
        let seq = self.seqs(1);
        let (end, intr2) = self.dump(&msg::dump(Dump::Rules, name, seq)?, seq, |f| {
            if f.kind == nft_type(NFT_MSG_NEWRULE) && ours(f) {
                let (chain, rule) = parse_rule(f).ok_or_else(|| bad("rule"))?;
                let c = chains
                    .iter_mut()
                    .find(|c| c.name == chain)
                    .ok_or_else(|| bad("rule's chain"))?;
                c.rules.push(rule);
            }
            Ok(())
        })?;
        end.map_err(|e| kernel("NFT_MSG_GETRULE dump", e, None))?;
        found.chains = chains;
        Ok(!intr1 && !intr2)
    }

    /// Every inet table of the netns, with its chains left out.
    pub fn tables(&self) -> Result<Vec<Found>, Error> {
        for _ in 0..ATTEMPTS {
            let seq = self.seqs(1);
            let mut tables = Vec::new();
            let (end, interrupted) = self.dump(&msg::dump_tables(seq), seq, |f| {
                if f.kind == nft_type(super::sys::NFT_MSG_NEWTABLE) {
                    tables.push(parse_table(f, 0).ok_or_else(|| bad("table"))?);
                }
                Ok(())
            })?;
            end.map_err(|e| kernel("NFT_MSG_GETTABLE dump", e, None))?;
            if !interrupted {
                return Ok(tables);
            }
        }
        Err(Error::Busy(ATTEMPTS))
    }

    /// Whether `table` is there as podtap made it.
    pub fn check(&self, table: &Table) -> Result<State, Error> {
        let Some(found) = self.read(&table.name)? else {
            return Ok(State::Missing);
        };
        if table.userdata().as_deref() != Some(&found.userdata[..]) {
            return Ok(State::Foreign(found));
        }
        let diffs = differences(table, &found);
        Ok(if diffs.is_empty() {
            State::Unchanged(found)
        } else {
            State::Altered(found, diffs)
        })
    }

    /// Replace the inet table of `table`'s name, if it carries `table`'s
    /// marker, with `table`, in one batch (created when there is none).
    pub fn replace(&self, table: &Table) -> Result<(), Error> {
        let userdata = table.userdata().unwrap_or_default();
        for _ in 0..ATTEMPTS {
            let generation = self.generation()?;
            let Some(found) = self.read_table(&table.name, generation)? else {
                return self.create(table);
            };
            if found.res_id != generation.to_be_bytes()[2..] {
                continue;
            }
            if found.userdata != userdata {
                return Err(Error::NotOurs {
                    table: found.name,
                    userdata: found.userdata,
                });
            }
            // One more sequence number: the deletion.
            let first = self.seqs(msg::create_len(table) + 1);
            match self.run(&msg::replace(table, found.handle, generation, first)?) {
                Err(e) if e.errno() == Some(Errno::ERESTART) => continue,
                r => return r,
            }
        }
        Err(Error::Busy(ATTEMPTS))
    }

    /// Delete the inet table `name` if it carries `userdata` (podtap's
    /// marker, [`Table::userdata`]): read it, then delete it by its handle
    /// in a batch bound to the generation it was read in, so that a table
    /// changed or made again in between is never the one deleted (the
    /// kernel refuses the batch with `ERESTART`, and it is read again).
    pub fn delete(&self, name: &str, userdata: &[u8]) -> Result<Deleted, Error> {
        for _ in 0..ATTEMPTS {
            let generation = self.generation()?;
            let Some(found) = self.read_table(name, generation)? else {
                return Ok(Deleted::Missing);
            };
            if found.res_id != generation.to_be_bytes()[2..] {
                continue;
            }
            if found.userdata != userdata {
                return Err(Error::NotOurs {
                    table: found.name,
                    userdata: found.userdata,
                });
            }
            let batch = msg::delete(found.handle, Some(generation), self.seqs(3));
            match self.run(&batch) {
                Ok(()) => return Ok(Deleted::Deleted(found.handle)),
                Err(e) if e.errno() == Some(Errno::ERESTART) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Busy(ATTEMPTS))
    }
}

fn kernel(what: &'static str, errno: Errno, message: Option<String>) -> Error {
    Error::Kernel {
        op: msg::Op::Get(what),
        errno,
        message,
        also: Vec::new(),
    }
}

fn bad(what: &str) -> Error {
    Error::Protocol(format!("a {what} in the dump did not parse"))
}
