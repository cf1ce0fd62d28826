//! The command line: argument parsing, dispatch, and the one place errors become exit codes.

pub mod trace;

pub fn main() -> i32 {
    crate::exit::SUCCESS
}
