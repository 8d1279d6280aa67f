//! podtap's nftables table of an attachment, spoken to the kernel over
//! `NETLINK_NETFILTER` directly (no `nft` binary, no libnftnl: podtap is
//! Apache-2.0 and encodes the few messages a fixed table needs itself).
//!
//! - [`model`]: what to build, as a value: a [`Table`] of base chains whose
//!   rules are fixed shapes ([`Rule`]'s constructors), or the whole table
//!   of one attachment from a [`Spec`] ([`Table::podtap`]).
//! - [`expr`], [`msg`]: their wire form: expressions, the creation and
//!   deletion batches, the requests that read a table back. Pure.
//! - [`Nft`]: a blocking `NETLINK_NETFILTER` socket in one netns that
//!   sends a batch and reads its acks ([`Nft::run`], the one place errors
//!   are read), creates ([`Nft::create`]), reads back ([`Nft::read`],
//!   [`Nft::check`]), lists ([`Nft::tables`]) and deletes
//!   ([`Nft::delete`]) tables.
//! - [`readback`]: a dumped table and how it compares with the one meant.
//!
//! What the kernel was found to do: a batch is all or nothing, and its
//! acks of 0 do not say it was applied (only the absence of any error
//! does); creating a table that exists without `NLM_F_EXCL` "updates" it,
//! so creation always sets it; a dumped rule's expressions are the bytes
//! sent, but for the nested flag the kernel drops; every committed batch
//! moves the ruleset's generation, which a deletion is tied to.

pub mod attr;
mod conn;
pub mod error;
pub mod expr;
pub mod model;
pub mod msg;
mod ops;
pub mod readback;
pub mod sys;

pub use conn::Nft;
pub use error::Error;
pub use model::{Forward, Guard, NatPair, Spec, Table};
pub use ops::State;
