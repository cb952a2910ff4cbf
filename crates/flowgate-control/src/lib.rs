#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
//! Flowgate's control plane (D39): what operators do, over the domain's ports.
//!
//! The console and the admin API (`flowgate-http`) and the command line (the binary) call these
//! use cases; each takes the ports it needs (the database store, or the domain's in-memory one
//! in tests) and holds no state of its own.
//!
//! - [`console`]: what the operator console does, over one store (the pages are
//!   `flowgate-http`'s).
//! - [`keys`]: create an API key (D1, D13).
//! - [`people`]: add a person, make a sign-in link, change a role or disable (D28).
//! - [`import`]: import a catalog file, or see what it would change (D13, D19).
//! - [`changes`]: preview and apply a change to the catalog (D28), the write every schedule,
//!   review and rollout step goes through.
//! - [`results`]: read an experiment's report, or the list of experiments (D22).
//! - [`review`]: propose a change for review (D28, D35): catalog changes, rollout starts and
//!   catalog imports, each applied later by another editor's approval.
//! - [`rollouts`]: start, step, pause, resume, roll back and abandon a staged rollout (D29).
//! - [`schedules`]: apply the scheduled changes due and the experiments' own schedules (D29).
//! - [`scheduler`]: the pass the scheduler's lease holder makes each interval (D29).

pub mod changes;
pub mod console;
pub mod import;
pub mod keys;
pub mod people;
pub mod results;
pub mod review;
pub mod rollouts;
pub mod scheduler;
pub mod schedules;

use flowgate_domain::ports::{AuditLog, CatalogWriter, ChangeStore, PeopleStore, RolloutStore};

/// The ports the control plane's use cases read and write through: the database store in
/// production, the domain's in-memory store in tests.
pub trait ControlStore:
    CatalogWriter + ChangeStore + RolloutStore + AuditLog + PeopleStore
{
}

impl<T> ControlStore for T where
    T: CatalogWriter + ChangeStore + RolloutStore + AuditLog + PeopleStore + ?Sized
{
}
