//! The statistics of every number vitgraph shows with an interval: one
//! module, one generator, one bootstrap, and one method per design.
//!
//! | what | design | method | where |
//! |---|---|---|---|
//! | a configuration's value | two or more processes (repetitions) | mean, Student t-interval over the processes, on the log scale for a positive quantity | [`estimate::of_repetitions`] |
//! | a configuration's value | one process | the run's batches: order statistics for a quantile, t for a mean (a report), or `rel_se` on the log scale (`compare`, which keeps no batches) | [`statistic`], [`ratio::side`] |
//! | a ratio of two configurations | measured together (the same processes) | the per-process log-ratios' t-interval | [`estimate::paired_ratio`] |
//! | a ratio of two configurations | apart, repeated | Welch on the log scale | [`estimate::ratio_of_repetitions`] |
//! | a ratio of two configurations | apart, one run on a side | the log scale, batches' and repetitions' variances, Welch–Satterthwaite | [`ratio::ratio`] |
//! | a precision target | as the value or ratio it names | the same interval's half-width | `engine::precision` |
//! | a verdict | any ratio | its interval against the equivalence margin | [`verdict`] |
//! | a run's `median_ci95` | one run's batches | percentile bootstrap | [`bootstrap::interval`] |
//!
//! Intervals over processes are t-intervals, not bootstraps: with the 3 to
//! 10 processes a study affords, a bootstrap sees a few dozen distinct
//! resamples and its percentile interval is too narrow (its spread is a
//! normal's with the processes' population deviation, where a t with
//! n − 1 degrees of freedom applies), while the t-interval is exact
//! for normal log-values and close otherwise; the coverage tests of
//! [`estimate`] and [`ratio`] hold each at 93 % or more. A report's
//! `compare.csv` and `vitgraph compare` both call [`ratio::ratio`], so one
//! pair gets one interval wherever it is shown.
//!
//! No dependency: the t quantile, the generator and the rank test's exact
//! distribution are written out here, so an interval reads the same after
//! any upgrade.

pub mod bootstrap;
pub mod estimate;
pub mod latency;
pub mod nsys;
pub mod rank;
pub mod ratio;
pub mod statistic;
pub mod verdict;

pub use bootstrap::Rng;
pub use estimate::{Basis, Estimate};
pub use ratio::{Design, Ratio, Value};
pub use statistic::Statistic;
