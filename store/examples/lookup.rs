//! Measures keyspace lookups: `cargo run --release -p goblin-store --example lookup`.
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::Instant;

use goblin_store::Keyspace;

fn main() {
    for n in [100_000usize, 1_000_000] {
        let mut ks = Keyspace::new();
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("key:{i:012}").into_bytes())
            .collect();
        for k in &keys {
            ks.set_str(k, b"xxx", None, 0);
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let order: Vec<usize> = (0..2_000_000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as usize
            })
            .collect();
        let t = Instant::now();
        let mut found = 0usize;
        for &i in &order {
            if let Some(e) = ks.get(&keys[i], 0) {
                found += e.value().as_str().map_or(0, <[u8]>::len);
            }
        }
        let el = t.elapsed();
        println!(
            "{n} keys: {:.1} ns/get ({found})",
            el.as_nanos() as f64 / order.len() as f64
        );
        let t = Instant::now();
        let mut s = 0u32;
        for &i in &order {
            s = s.wrapping_add(u32::from(goblin_store::key_slot(&keys[i])));
        }
        println!(
            "  key_slot alone: {:.1} ns ({s})",
            t.elapsed().as_nanos() as f64 / order.len() as f64
        );
    }
}
