//! The store's roles: [`Store`] is a facade that opens `cache/` and hands
//! out one borrowed handle per role, so a caller names what it does with
//! the store and each role's methods live together:
//!
//! - [`Reader`] — the recorded states, runs, builds and jobs; through
//!   [`Store::read`] every query of a closure sees one state of the
//!   database (a read transaction), through [`Store::reader`] each query
//!   its own (`transaction`, `runs`, `history`, `runsets`, `jobs`);
//! - [`Journal`] — what happens: attempts begun and ended, cluster jobs,
//!   environment probes, baselines, key and driver locks, task groups
//!   (`runs`, `jobs`, `lock`, `groups`, `runsets`);
//! - [`Objects`] — the content-addressed objects: staging a run, committing
//!   it, materializing outputs, `verify`, `repair`, `gc` (`objects`,
//!   `batch`, `maintenance`);
//! - [`Hasher`](super::Hasher) — judging files through the stat cache
//!   (`hasher`).
//!
//! A handle is a borrowed `&Store`: free to make, `Copy`, and usable from
//! any thread the store is shared with.

use std::ops::Deref;

use super::open::Store;

macro_rules! role {
    ($(#[$doc:meta])* $name:ident, $make:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            store: &'a Store,
        }

        impl Deref for $name<'_> {
            type Target = Store;

            fn deref(&self) -> &Store {
                self.store
            }
        }

        impl Store {
            $(#[$doc])*
            pub fn $make(&self) -> $name<'_> {
                $name { store: self }
            }
        }
    };
}

role!(
    /// Queries of what was recorded.
    Reader,
    reader
);
role!(
    /// Records of attempts, jobs and probes, and the locks around them.
    Journal,
    journal
);
role!(
    /// The content-addressed objects and the runs that name them.
    Objects,
    objects
);
