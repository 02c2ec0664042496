//! Commands' latency histograms — LATENCY HISTOGRAM and INFO latencystats — as
//! redis-server 7.0 keeps them with `latency-tracking yes` (its default): per command,
//! an HDR histogram of nanoseconds from 1 to 1,000,000,000 with two significant figures,
//! laid out as `hdr_histogram`'s (`deps/hdr_histogram`), so that its percentiles and its
//! cumulative buckets read the same. Each worker keeps its own per command, made at the
//! command's first run ([`Latencies`]); LATENCY HISTOGRAM and INFO add the workers' up.
//!
//! redis-server times a command in whole microseconds (`ustime`), so a command quicker
//! than one is recorded as 1 ns; Goblin records the nanoseconds it measured.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Half the sub-buckets of a bucket, as a power of two (two significant figures need
/// 256 sub-buckets: `hdr_calculate_bucket_config` with precision 2).
const HALF_MAGNITUDE: u32 = 7;
const HALF: usize = 1 << HALF_MAGNITUDE;
/// Sub-buckets per bucket.
const SUB_BUCKETS: u64 = 256;
/// Buckets needed to reach [`MAX`] (256 · 2^22 > 10^9).
const BUCKETS: usize = 23;
/// Counters: `(BUCKETS + 1) · HALF`, as `hdr_init` counts them.
const COUNTS: usize = (BUCKETS + 1) * HALF;
/// The least value recorded (redis-server's `LATENCY_HISTOGRAM_MIN_VALUE`), in ns.
const MIN: u64 = 1;
/// The greatest (`LATENCY_HISTOGRAM_MAX_VALUE`, one second), in ns: slower is this.
const MAX: u64 = 1_000_000_000;

/// `latency-tracking`: whether commands are recorded (CONFIG SET, start-up).
static TRACKING: AtomicBool = AtomicBool::new(true);

/// `latency-tracking-info-percentiles`, the percentiles INFO latencystats shows.
static PERCENTILES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// Whether commands' latencies are recorded (`latency-tracking`).
#[inline]
pub fn tracking() -> bool {
    TRACKING.load(Ordering::Relaxed)
}

/// Puts `latency-tracking` and `latency-tracking-info-percentiles` (checked already:
/// [`parse_percentiles`]) in force.
pub fn configure(tracking: bool, percentiles: &str) {
    TRACKING.store(tracking, Ordering::Relaxed);
    if let (Ok(parsed), Ok(mut kept)) = (parse_percentiles(percentiles), PERCENTILES.lock()) {
        *kept = parsed;
    }
}

/// The percentiles INFO latencystats shows.
pub fn percentiles() -> Vec<f64> {
    PERCENTILES.lock().map(|p| p.clone()).unwrap_or_default()
}

/// `latency-tracking-info-percentiles` read as redis-server reads it (each word a
/// number from 0 to 100; none at all for an empty value), with its reason otherwise.
pub fn parse_percentiles(value: &str) -> Result<Vec<f64>, String> {
    value
        .split_whitespace()
        .map(|word| {
            let p: f64 = word
                .parse()
                .ok()
                .filter(|p: &f64| !p.is_nan())
                .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
            if !(0.0..=100.0).contains(&p) {
                return Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                );
            }
            Ok(p)
        })
        .collect::<Result<_, _>>()
        .map_err(String::from)
}

/// A percentile as redis-server writes it (`%f` with its trailing zeros, and a trailing
/// point, trimmed: `99.9`, `50`).
pub fn percentile_text(p: f64) -> String {
    let text = format!("{p:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The checked value of `latency-tracking-info-percentiles`, as CONFIG GET shows it.
pub fn canonical_percentiles(value: &str) -> Result<String, String> {
    Ok(parse_percentiles(value)?
        .into_iter()
        .map(percentile_text)
        .collect::<Vec<_>>()
        .join(" "))
}

// --- The clock -----------------------------------------------------------------------

/// Where a command's run started, read from the cheapest clock that is reliable here:
/// timing every command reads it twice per command, so it must cost little beside a
/// GET's own work. On x86_64, when the kernel keeps time with the CPU's time-stamp counter
/// (its clock source is `tsc`: the counter is constant-rate and kept in step across
/// cores), it is the counter — one instruction, about 7 ns here against about 18 ns for
/// `Instant::now` — turned into nanoseconds at the rate measured against the monotonic
/// clock at start-up ([`calibrate`]); elsewhere, the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct Tick(u64);

/// How ticks become nanoseconds.
#[derive(Debug)]
enum Source {
    /// The time-stamp counter, at `scale` ns per tick · 2^32.
    #[cfg(target_arch = "x86_64")]
    Counter { scale: u64 },
    /// Nanoseconds of the monotonic clock since `origin`.
    Monotonic { origin: std::time::Instant },
}

static SOURCE: std::sync::OnceLock<Source> = std::sync::OnceLock::new();

/// Chooses the clock and measures the counter's rate (about 2 ms, once: at start-up, or
/// at the first tick).
pub fn calibrate() {
    source();
}

fn source() -> &'static Source {
    SOURCE.get_or_init(|| {
        let monotonic = Source::Monotonic {
            origin: std::time::Instant::now(),
        };
        #[cfg(target_arch = "x86_64")]
        {
            let clocksource = std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .unwrap_or_default();
            if clocksource.trim() != "tsc" {
                return monotonic;
            }
            let (t0, c0) = (std::time::Instant::now(), counter());
            std::thread::sleep(std::time::Duration::from_millis(2));
            let (nanos, ticks) = (t0.elapsed().as_nanos(), counter().wrapping_sub(c0));
            match u64::try_from((nanos << 32) / u128::from(ticks.max(1))) {
                Ok(scale) if scale > 0 && ticks > 0 => Source::Counter { scale },
                _ => monotonic,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        monotonic
    })
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline]
#[allow(unsafe_code)]
fn counter() -> u64 {
    // SAFETY: RDTSC reads the time-stamp counter into registers: it takes no operand,
    // reads and writes no memory and exists on every x86_64 CPU, so no call can break an
    // invariant (the intrinsic is `unsafe` only as every one of `core::arch` is).
    // Exercised by `tests::ticks_measure_time`.
    unsafe { core::arch::x86_64::_rdtsc() }
}

impl Tick {
    /// Now.
    #[inline]
    pub fn now() -> Tick {
        match source() {
            #[cfg(target_arch = "x86_64")]
            Source::Counter { .. } => Tick(counter()),
            Source::Monotonic { origin } => Tick(origin.elapsed().as_nanos() as u64),
        }
    }

    /// Nanoseconds since this tick.
    #[inline]
    pub fn elapsed_nanos(self) -> u64 {
        match source() {
            #[cfg(target_arch = "x86_64")]
            Source::Counter { scale } => {
                let ticks = counter().saturating_sub(self.0);
                ((u128::from(ticks) * u128::from(*scale)) >> 32) as u64
            }
            Source::Monotonic { origin } => {
                (origin.elapsed().as_nanos() as u64).saturating_sub(self.0)
            }
        }
    }
}

// --- The layout (hdr_histogram's, with a unit magnitude of 0) ------------------------

fn bucket_of(value: u64) -> u32 {
    let pow2ceiling = 64 - (value | (SUB_BUCKETS - 1)).leading_zeros();
    pow2ceiling - (HALF_MAGNITUDE + 1)
}

fn index_of(value: u64) -> usize {
    let bucket = bucket_of(value);
    let sub = (value >> bucket) as usize;
    ((bucket as usize + 1) << HALF_MAGNITUDE) + sub - HALF
}

fn value_at(index: usize) -> u64 {
    let bucket = (index >> HALF_MAGNITUDE) as i64 - 1;
    let sub = (index & (HALF - 1)) + HALF;
    if bucket < 0 {
        (sub - HALF) as u64
    } else {
        (sub as u64) << bucket
    }
}

fn lowest_equivalent(value: u64) -> u64 {
    let bucket = bucket_of(value);
    (value >> bucket) << bucket
}

fn highest_equivalent(value: u64) -> u64 {
    let bucket = bucket_of(value);
    let sub = value >> bucket;
    let adjusted = if sub >= SUB_BUCKETS {
        bucket + 1
    } else {
        bucket
    };
    lowest_equivalent(value) + (1 << adjusted) - 1
}

/// Blocks of counters: hdr_histogram's counters, [`HALF`] to a block, a block made at
/// its first run. A command's runs fall in a few of them, so its histogram takes a few
/// KiB on each thread rather than hdr_histogram's 24.
const BLOCKS: usize = COUNTS / HALF;

/// One command's latencies on one worker.
#[derive(Clone, Debug)]
pub struct Histogram {
    blocks: [Option<Box<[u64; HALF]>>; BLOCKS],
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            blocks: [const { None }; BLOCKS],
            total: 0,
        }
    }
}

impl Histogram {
    /// Records a run of `nanos` (clamped to 1 ns … 1 s, as redis-server clamps it).
    #[inline]
    pub fn record(&mut self, nanos: u64) {
        let index = index_of(nanos.clamp(MIN, MAX));
        if let Some(block) = self.blocks.get_mut(index / HALF) {
            block.get_or_insert_with(|| Box::new([0; HALF]))[index % HALF] += 1;
            self.total += 1;
        }
    }

    /// The counter at `index` (0 in a block never made, or past the end).
    fn count(&self, index: usize) -> u64 {
        self.blocks
            .get(index / HALF)
            .and_then(Option::as_deref)
            .map_or(0, |block| block[index % HALF])
    }

    /// How many runs it holds (LATENCY HISTOGRAM's `calls`).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Adds `other`'s runs (another worker's, for the same command).
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.blocks.iter_mut().zip(other.blocks.iter()) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(|| Box::new([0; HALF]));
                for (m, t) in mine.iter_mut().zip(theirs.iter()) {
                    *m += t;
                }
            }
        }
        self.total += other.total;
    }

    /// The value at percentile `p`, in ns (`hdr_value_at_percentile`: the highest value
    /// equivalent to the first counter reaching that share of the runs; the lowest at 0).
    pub fn value_at_percentile(&self, p: f64) -> u64 {
        let p = p.min(100.0);
        let wanted = (((p / 100.0) * self.total as f64) + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        let mut found = 0;
        'blocks: for (b, block) in self.blocks.iter().enumerate() {
            let Some(block) = block else { continue };
            for (i, count) in block.iter().enumerate() {
                seen += count;
                if seen >= wanted {
                    found = value_at(b * HALF + i);
                    break 'blocks;
                }
            }
        }
        if p == 0.0 {
            lowest_equivalent(found)
        } else {
            highest_equivalent(found)
        }
    }

    /// LATENCY HISTOGRAM's `histogram_usec`: cumulative counts at buckets of powers of
    /// two from 1024 ns, each reported in µs, as `fillCommandCDF` walks them
    /// (`hdr_iter_log_init(1024, 2)`, only steps that add runs).
    pub fn cumulative_usec(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        // The iterator's state: the counter it is at, the runs up to it, its value and
        // the highest value equivalent to it; the next reporting level.
        let mut index: Option<usize> = None;
        let (mut cumulative, mut value, mut highest) = (0u64, 0u64, 0u64);
        let mut level: u64 = 1024;
        let mut level_lowest = lowest_equivalent(level);
        let mut previous = 0;
        loop {
            let next = index.map_or(0, |i| i + 1);
            let more_buckets = next <= COUNTS && value_at(next) > level_lowest;
            if cumulative >= self.total && !more_buckets {
                break;
            }
            loop {
                if value >= level_lowest {
                    level = level.saturating_mul(2);
                    level_lowest = lowest_equivalent(level);
                    break;
                }
                let i = index.map_or(0, |i| i + 1);
                index = Some(i);
                if i >= COUNTS {
                    break;
                }
                let count = self.count(i);
                cumulative += count;
                value = value_at(i);
                highest = highest_equivalent(value);
            }
            if cumulative > previous {
                out.push((highest / 1000, cumulative));
            }
            previous = cumulative;
        }
        out
    }
}

/// A worker's histograms, one per command id, each made at the command's first run.
#[derive(Debug, Default)]
pub struct Latencies {
    by_command: Vec<Option<Box<Histogram>>>,
}

impl Latencies {
    /// Records a run of command `id` that took `nanos`.
    #[inline]
    pub fn record(&mut self, id: usize, nanos: u64) {
        if id >= self.by_command.len() {
            self.by_command.resize_with(id + 1, || None);
        }
        if let Some(slot) = self.by_command.get_mut(id) {
            slot.get_or_insert_with(Box::default).record(nanos);
        }
    }

    /// The commands with runs, by id.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Histogram)> {
        self.by_command
            .iter()
            .enumerate()
            .filter_map(|(id, h)| h.as_deref().map(|h| (id, h)))
    }

    /// Forgets every run (CONFIG RESETSTAT).
    pub fn clear(&mut self) {
        self.by_command.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_hdr_histograms() {
        // Exact below 256; then each bucket doubles its sub-buckets' width.
        assert_eq!(value_at(index_of(1)), 1);
        assert_eq!(value_at(index_of(255)), 255);
        assert_eq!(value_at(index_of(257)), 256);
        assert_eq!(highest_equivalent(1000), 1003);
        assert_eq!(lowest_equivalent(1003), 1000);
        assert_eq!(highest_equivalent(50_000_000), 50_069_503);
        assert!(index_of(MAX) < COUNTS);
        for index in [0, 1, 127, 128, 255, 256, 1000, COUNTS - 1] {
            assert_eq!(index_of(value_at(index)), index, "{index}");
        }
    }

    #[test]
    fn percentiles_read_as_redis_servers() {
        let mut h = Histogram::default();
        h.record(1000);
        // redis-server's INFO for one run of 1 µs: p50=1.003, p99=1.003, p99.9=1.003.
        assert_eq!(h.value_at_percentile(50.0), 1003);
        assert_eq!(h.value_at_percentile(100.0), 1003);
        assert_eq!(h.value_at_percentile(0.0), 1000);
        for n in [10_000, 20_000, 30_000] {
            h.record(n);
        }
        assert_eq!(h.total(), 4);
        assert_eq!(h.value_at_percentile(50.0), 10_047);
        assert_eq!(h.value_at_percentile(99.0), 30_079);
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.value_at_percentile(0.0), 1);
        assert_eq!(h.value_at_percentile(100.0), highest_equivalent(MAX));
    }

    #[test]
    fn cumulative_buckets_walk_as_fill_command_cdf() {
        let mut h = Histogram::default();
        assert!(h.cumulative_usec().is_empty());
        h.record(1000);
        h.record(1000);
        assert_eq!(h.cumulative_usec(), vec![(1, 2)]);
        h.record(3000);
        h.record(70_000);
        // Buckets at 1024, 2048, 4096 … ns: the 3 µs run lands at the 4096's (4 µs),
        // the 70 µs one at the 131072's (132 µs: the highest value it stands for).
        assert_eq!(h.cumulative_usec(), vec![(1, 2), (4, 3), (132, 4)]);
        let mut other = Histogram::default();
        other.record(1);
        h.merge(&other);
        assert_eq!(h.cumulative_usec(), vec![(1, 3), (4, 4), (132, 5)]);
        let mut slow = Histogram::default();
        slow.record(u64::MAX);
        assert_eq!(slow.cumulative_usec().last().map(|b| b.1), Some(1));
    }

    #[test]
    fn a_histogram_makes_only_the_blocks_its_runs_fall_in() {
        let mut h = Histogram::default();
        for n in [80, 95, 120, 300, 1000, 1500] {
            h.record(n);
        }
        let made = h.blocks.iter().filter(|b| b.is_some()).count();
        assert_eq!(made, 4, "{:?}", h.cumulative_usec());
        assert_eq!(h.total(), 6);
        assert_eq!(h.value_at_percentile(50.0), highest_equivalent(120));
    }

    #[test]
    fn ticks_measure_time() {
        calibrate();
        let started = Tick::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let nanos = started.elapsed_nanos();
        assert!((19_000_000..200_000_000).contains(&nanos), "{nanos} ns");
        let quick = Tick::now().elapsed_nanos();
        assert!(quick < 10_000_000, "{quick} ns");
    }

    #[test]
    fn percentiles_are_checked_as_redis_checks_them() {
        assert_eq!(
            canonical_percentiles("50 99 99.9").as_deref(),
            Ok("50 99 99.9")
        );
        assert_eq!(
            canonical_percentiles("0.0 50.0 100.0").as_deref(),
            Ok("0 50 100")
        );
        assert_eq!(canonical_percentiles("").as_deref(), Ok(""));
        assert_eq!(
            canonical_percentiles("10.0 50.0 a"),
            Err("Invalid latency-tracking-info-percentiles parameters".into())
        );
        assert_eq!(
            canonical_percentiles("10.0 50.0 101.0"),
            Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into()
            )
        );
        assert!(canonical_percentiles("nan").is_err());
        assert_eq!(percentile_text(99.9), "99.9");
    }
}
