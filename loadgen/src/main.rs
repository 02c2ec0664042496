//! goblin-loadgen: Goblin's bundled load generator (a stub until its issue lands).

fn main() {
    eprintln!("goblin-loadgen: not implemented yet; use redis-benchmark for now");
    std::process::exit(2);
}
