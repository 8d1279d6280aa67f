//! podtap: bridge a prepared pod network namespace to VM NICs.
//!
//! The flow: [`netns`] opens and validates a netns, [`scan`] reads it into a
//! [`model::Description`], [`plan`] decides what to build, [`attach`] applies
//! the plan through [`tap`] and [`wiring`] while [`checkpoint`] records it,
//! [`teardown`] undoes it, and [`render`] turns the description into VMM
//! arguments.
pub mod attach;
pub mod check;
pub mod checkpoint;
pub mod cli;
pub mod cni;
pub mod demo;
pub mod detach;
pub mod error;
pub mod exec;
pub mod fixture;
pub mod model;
pub mod netns;
pub mod oci_hook;
pub mod plan;
pub mod render;
pub mod runtime;
pub mod scan;
pub mod tap;
pub mod teardown;
pub mod wiring;
