//! The pages, one module each; each handler reads through the operations API and renders a template.

pub(crate) mod batches;
pub(crate) mod chart;
pub(crate) mod dead;
pub(crate) mod job;
pub(crate) mod overview;
pub(crate) mod topic;
pub(crate) mod workers;
