//! `vitgraph-torch`: vitgraph built with libtorch. The engine of a torch-free
//! `vitgraph` runs `Vit` and `OpBench` nodes in it (`exec-task`); it is also a
//! complete `vitgraph` itself, only slower to start.
fn main() {
    std::process::exit(vitgraph::cli::main());
}
