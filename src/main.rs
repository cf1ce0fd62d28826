fn main() {
    std::process::exit(vitgraph::cli::main());
}
