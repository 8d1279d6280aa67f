//! podtap: bridge a prepared pod network namespace to VM NICs.
//!
//! The flow: [`kernel::netns`] opens and validates a netns, [`scan`] reads it into a
//! [`model::Description`], [`plan`] decides what to build, [`attach`] applies
//! the plan through the [`kernel`] layer while [`state`] records it,
//! [`teardown`] undoes it, and [`render`] turns the description into VMM
//! arguments. The [`doors`] (CLI, CNI, OCI hook) sit on top.
pub mod attach;
pub mod check;
pub mod detach;
pub mod doors;
pub mod error;
pub mod kernel;
pub mod model;
pub mod plan;
pub mod render;
pub mod scan;
pub mod state;
pub mod teardown;
