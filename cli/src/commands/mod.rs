//! One module per group of commands, each a thin client of [`postpone::ops::Ops`].

pub(crate) mod batches;
pub(crate) mod control;
pub(crate) mod dead;
pub(crate) mod doctor;
pub(crate) mod jobs;
pub(crate) mod keys;
pub(crate) mod overview;
pub(crate) mod periodic;
pub(crate) mod scripts;
pub(crate) mod serve;
