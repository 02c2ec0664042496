//! goblin-loadgen: Goblin's bundled load generator. See the `goblin_loadgen` library for
//! how it works, and `goblin-loadgen --help` for its options.

fn main() {
    std::process::exit(goblin_loadgen::run_cli());
}
