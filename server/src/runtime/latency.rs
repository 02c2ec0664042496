//! The latency monitor (LATENCY LATEST / HISTORY / RESET / DOCTOR), as redis-server 7.0
//! keeps it: with `latency-monitor-threshold` set, every event at least that slow (a
//! command, a fast command, an active-expiry or eviction cycle, a log write or fsync) is
//! a sample of its event's series — at most one per second (the worst), the last 160 —
//! with the worst ever seen. Off (threshold 0) it costs one atomic load where an event
//! could be recorded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use goblin_protocol::Encoder;

/// Samples kept per event (redis-server's `LATENCY_TS_LEN`).
const SERIES_LEN: usize = 160;

/// LATENCY GRAPH's width (`LATENCY_GRAPH_COLS`).
const GRAPH_COLS: usize = 80;

/// Draws `samples` (value, label) as redis-server's `sparklineRender` does with
/// `SPARKLINE_FILL`: `columns` samples per block, `rows` rows of `_o#` (and `|` below
/// the top), then a blank line and the labels written downwards.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: usize) {
    let (min, max) = samples
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (v, _)| {
            (lo.min(*v), hi.max(*v))
        });
    let fill = [b'_', b'o', b'#'];
    let steps = (fill.len() * rows) as i64;
    let span = if max - min == 0.0 { 1.0 } else { max - min };
    for (block, chunk) in samples.chunks(columns).enumerate() {
        if block != 0 {
            out.push('\n');
        }
        let mut row = 0usize;
        loop {
            let mut line = vec![b' '; chunk.len()];
            let mut more = false;
            for (j, (value, label)) in chunk.iter().enumerate() {
                let step = ((((value - min) * steps as f64) as i64) as f64 / span) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    more = true;
                    let idx = step - ((rows - row - 1) * fill.len()) as i64;
                    if (0..fill.len() as i64).contains(&idx) {
                        line[j] = fill[idx as usize];
                    } else if idx >= fill.len() as i64 {
                        line[j] = b'|';
                    }
                } else {
                    // One blank line between the graph and its labels.
                    if row - rows < 1 {
                        more = true;
                        break;
                    }
                    if let Some(&c) = label.as_bytes().get(row - rows - 1) {
                        more = true;
                        line[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&line));
            out.push('\n');
        }
    }
}

/// One event's samples: `(unix seconds, milliseconds)`, oldest first, and the worst ever.
#[derive(Debug, Default, Clone)]
struct Series {
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor.
#[derive(Debug, Default)]
pub struct Latency {
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl Latency {
    /// A monitor recording events of at least `threshold_ms` (0: none).
    pub fn new(threshold_ms: u64) -> Self {
        let latency = Latency::default();
        latency.set_threshold(threshold_ms);
        latency
    }

    /// `latency-monitor-threshold` (CONFIG SET).
    pub fn set_threshold(&self, threshold_ms: u64) {
        self.threshold_ms.store(threshold_ms, Ordering::Relaxed);
    }

    /// Whether events are recorded at all.
    pub fn enabled(&self) -> bool {
        self.threshold_ms.load(Ordering::Relaxed) > 0
    }

    /// Records `event` taking `ms` milliseconds, if that reaches the threshold.
    pub fn add(&self, event: &'static str, ms: u64) {
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        if threshold == 0 || ms < threshold {
            return;
        }
        let now = crate::clock::now_ms() / 1000;
        let mut events = self.lock();
        let series = events.entry(event).or_default();
        series.max = series.max.max(ms);
        match series.samples.back_mut() {
            // One sample per second: the worst of it.
            Some((at, worst)) if *at == now => *worst = (*worst).max(ms),
            _ => {
                series.samples.push_back((now, ms));
                if series.samples.len() > SERIES_LEN {
                    series.samples.pop_front();
                }
            }
        }
    }

    /// Records a command that took `micros` microseconds: a `fast-command` or a
    /// `command` event, as its COMMAND INFO flags say.
    pub fn add_command(&self, fast: bool, micros: u64) {
        let event = if fast { "fast-command" } else { "command" };
        self.add(event, micros / 1000);
    }

    /// LATENCY LATEST: per event, its name, the time and latency of its latest sample, and
    /// its worst.
    pub fn latest(&self, out: &mut Encoder<'_>) {
        let events = self.lock();
        out.array(events.len());
        for (name, series) in events.iter() {
            let (at, ms) = series.samples.back().copied().unwrap_or_default();
            out.array(4);
            out.bulk(name.as_bytes());
            out.integer(at as i64);
            out.integer(ms as i64);
            out.integer(series.max as i64);
        }
    }

    /// LATENCY HISTORY event: its samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &[u8], out: &mut Encoder<'_>) {
        let events = self.lock();
        let series = events
            .iter()
            .find(|(name, _)| name.as_bytes() == event)
            .map(|(_, s)| s);
        let samples = series.map(|s| s.samples.len()).unwrap_or(0);
        out.array(samples);
        for (at, ms) in series.into_iter().flat_map(|s| s.samples.iter()) {
            out.array(2);
            out.integer(*at as i64);
            out.integer(*ms as i64);
        }
    }

    /// LATENCY GRAPH event: the event's samples as redis-server draws them (a header,
    /// then a four-row ASCII sparkline of 80 columns, each sample labelled with how long
    /// ago it was); `None` for an event without samples.
    pub fn graph(&self, event: &[u8]) -> Option<String> {
        let events = self.lock();
        let (name, series) = events.iter().find(|(name, _)| name.as_bytes() == event)?;
        let now = crate::clock::now_ms() / 1000;
        let samples: Vec<(f64, String)> = series
            .samples
            .iter()
            .map(|&(at, ms)| {
                let ago = now.saturating_sub(at);
                let label = match ago {
                    0..60 => format!("{ago}s"),
                    60..3600 => format!("{}m", ago / 60),
                    3600..86400 => format!("{}h", ago / 3600),
                    _ => format!("{}d", ago / 86400),
                };
                (ms as f64, label)
            })
            .collect();
        let high = series.samples.iter().map(|s| s.1).max().unwrap_or(0);
        let low = series.samples.iter().map(|s| s.1).min().unwrap_or(0);
        let mut graph = format!(
            "{name} - high {high} ms, low {low} ms (all time high {} ms)\n{}\n",
            series.max,
            "-".repeat(GRAPH_COLS)
        );
        sparkline(&mut graph, &samples, GRAPH_COLS, 4);
        Some(graph)
    }

    /// LATENCY RESET [event ...]: forgets those events (every one when none is named);
    /// answers how many there were.
    pub fn reset(&self, names: &[&[u8]]) -> usize {
        let mut events = self.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let before = events.len();
        events.retain(|name, _| !names.contains(&name.as_bytes()));
        before - events.len()
    }

    /// LATENCY DOCTOR's report (redis-server's texts for the cases without samples).
    pub fn doctor(&self) -> String {
        if !self.enabled() {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                    Redis instance. You may use \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>.\" in order to enable it. If we weren't in a deep space \
                    mission I'd suggest to take a look at \
                    https://redis.io/topics/latency-monitor.\n"
                .to_string();
        }
        let events = self.lock();
        if events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Redis \
                    instance, not in the slightest bit. I honestly think you ought to sit down \
                    calmly, take a stress pill, and think things over.\n"
                .to_string();
        }
        let mut report = String::from(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind \
             talking about it, do you Dave?\n\n",
        );
        for (i, (name, series)) in events.iter().enumerate() {
            let n = series.samples.len().max(1) as u64;
            let sum: u64 = series.samples.iter().map(|(_, ms)| ms).sum();
            let avg = sum / n;
            let dev = series
                .samples
                .iter()
                .map(|(_, ms)| ms.abs_diff(avg))
                .sum::<u64>()
                / n;
            let period = match (series.samples.front(), series.samples.back()) {
                (Some((first, _)), Some((last, _))) if n > 1 => (last - first) as f64 / n as f64,
                _ => 1.0,
            };
            report.push_str(&format!(
                "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {dev}ms, period \
                 {period:.2} sec). Worst all time event {}ms.\n",
                i + 1,
                series.samples.len(),
                series.max
            ));
        }
        report.push_str(
            "\nI have a few advices for you:\n\n- Check your Slow Log to understand what are \
             the commands you are running which are too slow to execute. Please check \
             https://redis.io/commands/slowlog for more information.\n",
        );
        report
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Series>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_reach_the_threshold_one_per_second() {
        let l = Latency::new(0);
        l.add("command", 100);
        assert_eq!(l.reset(&[]), 0);
        l.set_threshold(10);
        l.add("command", 5);
        l.add("command", 20);
        l.add("command", 30);
        l.add("expire-cycle", 10);
        let events = l.lock();
        let series = &events["command"];
        assert_eq!(series.samples.len(), 1, "one per second");
        assert_eq!(series.samples[0].1, 30);
        assert_eq!(series.max, 30);
        drop(events);
        assert_eq!(l.reset(&[b"nope", b"command"]), 1);
        assert_eq!(l.reset(&[]), 1);
    }
}
