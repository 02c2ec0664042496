//! Codec micro-benchmarks: request decoding per command, reply encoding per reply.
//!
//! ```text
//! cargo bench -p goblin-protocol --bench codec -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each iteration handles a batch of [`BATCH`] requests or replies, as a pipelined
//! connection does; criterion reports the time per batch and, from `Throughput::Elements`,
//! requests or replies per second. A summary printed at the end divides the median
//! sample by the batch size: nanoseconds per command and per reply.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use goblin_protocol::{Decoded, Encoder, RequestDecoder, Version};

/// Requests per decoded pipeline and replies per encoded batch: a typical pipeline depth.
const BATCH: usize = 16;
/// Fewer timed samples than this (criterion's `--test` mode runs each routine once) give
/// no summary line.
const MIN_SAMPLES_FOR_SUMMARY: usize = 10;

/// Per-element timings of every sample criterion took, by benchmark.
#[derive(Default)]
struct Recorder {
    benches: Vec<(String, &'static str, Vec<f64>)>,
}

impl Recorder {
    /// Times `iters` runs of `routine` (one batch each) for criterion, and keeps the time
    /// per element for the summary.
    fn time(
        &mut self,
        name: &str,
        unit: &'static str,
        iters: u64,
        mut routine: impl FnMut(),
    ) -> Duration {
        let start = Instant::now();
        for _ in 0..iters {
            routine();
        }
        let elapsed = start.elapsed();
        let per_element = elapsed.as_nanos() as f64 / (iters as f64 * BATCH as f64);
        match self.benches.iter_mut().find(|(n, _, _)| n == name) {
            Some((_, _, samples)) => samples.push(per_element),
            None => self
                .benches
                .push((name.to_string(), unit, vec![per_element])),
        }
        elapsed
    }

    fn print_summary(&mut self) {
        for (name, unit, samples) in &mut self.benches {
            if samples.len() < MIN_SAMPLES_FOR_SUMMARY {
                continue;
            }
            samples.sort_by(f64::total_cmp);
            let median = samples[samples.len() / 2];
            println!(
                "{name:<28} {median:>8.1} ns/{unit}  (median of {} samples)",
                samples.len()
            );
        }
    }
}

/// `BATCH` multibulk requests built by `request(i)`, back to back.
fn pipeline(request: impl Fn(usize) -> Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..BATCH {
        let args = request(i);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(&a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{:06}", 123 + i).into_bytes()
}

/// Decodes every request in `buf` the way a connection does, touching each argument;
/// returns the number of commands.
fn decode_all(dec: &mut RequestDecoder, buf: &mut [u8]) -> usize {
    let mut start = 0;
    let mut commands = 0;
    while start < buf.len() {
        match dec.decode(&mut buf[start..]) {
            Ok(Decoded::Command(n)) => {
                black_box(dec.args().iter().map(|r| r.len()).sum::<usize>());
                commands += 1;
                start += n;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    commands
}

fn bench_decode(c: &mut Criterion, rec: &mut Recorder) {
    let set = pipeline(|i| vec![b"SET".to_vec(), key(i), vec![b'v'; 32]]);
    let get = pipeline(|i| vec![b"GET".to_vec(), key(i)]);
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, input) in [("set_32b_x16", set), ("get_x16", get)] {
        let mut buf = input;
        let mut dec = RequestDecoder::default();
        assert_eq!(decode_all(&mut dec, &mut buf), BATCH);
        let full = format!("decode/{name}");
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rec.time(&full, "command", iters, || {
                    black_box(decode_all(&mut dec, black_box(&mut buf)));
                })
            })
        });
    }
    group.finish();
}

fn bench_encode(c: &mut Criterion, rec: &mut Recorder) {
    let value = [b'v'; 32];
    let elements: Vec<Vec<u8>> = (0..10).map(key).collect();
    let mut out = Vec::with_capacity(64 * 1024);
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(BATCH as u64));
    type Write<'v> = Box<dyn Fn(&mut Encoder<'_>) + 'v>;
    let cases: [(&str, Write<'_>); 4] = [
        ("bulk_32b", Box::new(|e| e.bulk(black_box(&value)))),
        ("integer", Box::new(|e| e.integer(black_box(1_234_567)))),
        ("ok", Box::new(|e| e.ok())),
        (
            "array_10_bulks",
            Box::new(|e| {
                e.array(elements.len());
                for el in &elements {
                    e.bulk(black_box(el));
                }
            }),
        ),
    ];
    for (name, write) in &cases {
        let full = format!("encode/{name}");
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                rec.time(&full, "reply", iters, || {
                    out.clear();
                    let mut enc = Encoder::new(&mut out, Version::Resp2);
                    for _ in 0..BATCH {
                        write(&mut enc);
                    }
                    black_box(out.len());
                })
            })
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut rec = Recorder::default();
    bench_decode(&mut c, &mut rec);
    bench_encode(&mut c, &mut rec);
    c.final_summary();
    rec.print_summary();
}
