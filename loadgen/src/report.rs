//! The run's figures and the three ways they leave the program: the table on stdout,
//! `--json`, and `--hdr` (HdrHistogram's percentile distribution text).

use std::fmt::Write as _;
use std::io::{self, Write};

use hdrhistogram::Histogram;

use crate::json::Json;
use crate::stats::{Counters, HIST_SIGFIG};

/// Nanoseconds per millisecond: latencies are recorded in ns and reported in ms.
const NS_PER_MS: f64 = 1_000_000.0;

/// Percentile ticks per half distance in `--hdr` output: the value HdrHistogram's own
/// tools (HistogramLogProcessor, wrk2) use.
const HDR_TICKS_PER_HALF_DISTANCE: u32 = 5;

/// Error kinds listed in the table (the most frequent first); `--json` lists them all.
const MAX_TABLE_ERROR_KINDS: usize = 10;

/// The quantiles every report shows, with their labels.
pub const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

/// Everything a finished run reports.
#[derive(Debug)]
pub struct Summary {
    /// `(name, value)` of the settings, in display order, for the header and the JSON.
    pub settings: Vec<(&'static str, Json)>,
    /// One-line description of the settings for the table's header.
    pub headline: String,
    /// Seconds from the start of measuring to the last measured reply.
    pub elapsed_s: f64,
    /// Latencies of all measured replies (the per-thread histograms merged).
    pub hist: Histogram<u64>,
    /// Errors and workload counters, all threads.
    pub counters: Counters,
    /// Which workload-specific section to show.
    pub workload: WorkloadSection,
    /// `--cluster`: the cluster figures (the redirects are in `counters`).
    pub cluster: Option<ClusterFigures>,
    /// Connection failures; a run with any is a failed run.
    pub failures: Vec<String>,
}

/// What a `--cluster` run reports besides the redirects it followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterFigures {
    /// Full slot-map refreshes (CLUSTER SLOTS) made after MOVED replies.
    pub map_refreshes: u64,
}

/// The workload-specific part of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadSection {
    /// Nothing beyond requests and errors.
    Plain,
    /// The claim counters and violations.
    Claim,
    /// The lock counters.
    Lock,
}

impl Summary {
    /// Measured replies (blocking ones included, though their latencies are not).
    pub fn requests(&self) -> u64 {
        self.hist.len() + self.counters.blocking_replies
    }

    /// Claim workload: requests completed (a result in hand) per second while measuring.
    pub fn completed_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.counters.claim.completed as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Claim workload: the duplicate wait at quantile `q`, in milliseconds (0 with none).
    pub fn dup_wait_ms(&self, q: f64) -> f64 {
        let h = &self.counters.dup_wait.0;
        if h.is_empty() {
            0.0
        } else {
            self.ms(h.value_at_quantile(q))
        }
    }

    /// Replies per second while measuring.
    pub fn throughput(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.requests() as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    fn ms(&self, ns: u64) -> f64 {
        ns as f64 / NS_PER_MS
    }

    /// The latency at quantile `q`, in milliseconds (0 with no replies).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.ms(self.hist.value_at_quantile(q))
        }
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "{}", self.headline);
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "  throughput    {:>12.0} ops/s   ({} replies in {:.2} s)",
            self.throughput(),
            self.requests(),
            self.elapsed_s
        );
        if self.counters.blocking_replies > 0 {
            let _ = writeln!(
                t,
                "                  ({} of them to waiting calls, whose latencies are the \
                 duplicate wait below, not the latency figures)",
                self.counters.blocking_replies
            );
        }
        let _ = write!(t, "  latency (ms)  ");
        for (label, _) in QUANTILES {
            let _ = write!(t, "{label:>9}");
        }
        let _ = writeln!(t, "{:>9}", "max");
        let _ = write!(t, "                ");
        for (_, q) in QUANTILES {
            let _ = write!(t, "{:>9.3}", self.quantile_ms(q));
        }
        let _ = writeln!(t, "{:>9.3}", self.ms(self.hist.max()));
        let errors = &self.counters.errors;
        let _ = writeln!(t, "  errors        {:>12}", errors.total());
        let kinds = errors.sorted();
        for (text, n) in kinds.iter().take(MAX_TABLE_ERROR_KINDS) {
            let _ = writeln!(t, "    {n:>10}  {text}");
        }
        if kinds.len() > MAX_TABLE_ERROR_KINDS {
            let _ = writeln!(
                t,
                "    … and {} more kinds (all of them in --json)",
                kinds.len() - MAX_TABLE_ERROR_KINDS
            );
        }
        if let Some(cl) = &self.cluster {
            let r = &self.counters.redirects;
            let _ = writeln!(
                t,
                "  redirects followed: MOVED {}, ASK {}, TRYAGAIN {}, CLUSTERDOWN {}   (not \
                 errors; slot map refreshed {} times)",
                r.moved, r.ask, r.tryagain, r.clusterdown, cl.map_refreshes
            );
        }
        match self.workload {
            WorkloadSection::Plain => {}
            WorkloadSection::Claim => {
                let c = &self.counters.claim;
                let waits = &self.counters.dup_wait.0;
                let _ = writeln!(
                    t,
                    "  completed     {:>12.0} requests/s   ({} requests with a result in hand: \
                     replayed, or published by their winner)",
                    self.completed_per_s(),
                    c.completed
                );
                let _ = write!(t, "  dup wait (ms) ");
                for (label, _) in QUANTILES {
                    let _ = write!(t, "{label:>9}");
                }
                let _ = writeln!(t, "{:>9}", "max");
                let _ = write!(t, "                ");
                for (_, q) in QUANTILES {
                    let _ = write!(t, "{:>9.3}", self.dup_wait_ms(q));
                }
                let _ = writeln!(
                    t,
                    "{:>9.3}   ({} duplicates that found the work in flight, from first call \
                     to result; {} more served at once)",
                    self.ms(waits.max()),
                    waits.len(),
                    c.dups_served_at_once
                );
                let _ = writeln!(
                    t,
                    "  claim         won {}, re-claimed after lease {}, won by a duplicate {}, \
                     replays served {}, nils {}, polls {}, wait timeouts {}, still waiting at the \
                     end {}",
                    c.claims_won,
                    c.reclaims_after_lease,
                    c.takeovers,
                    c.replays_served,
                    c.nils,
                    c.polls,
                    c.block_timeouts,
                    c.waiting_at_end
                );
                let _ = writeln!(
                    t,
                    "  workers       published {} (refused {}), crashed {}, ran long {} (renewals \
                     {}, refused {}), stalled past the lease {}",
                    c.published,
                    c.publish_refused,
                    c.crashed,
                    c.long_workers,
                    c.renewals,
                    c.renew_refused,
                    c.stalled
                );
                let _ = writeln!(
                    t,
                    "  violations    {:>12}   (two owners in one lease {}, results re-computed {}, \
                     stale publications accepted {}, stale renewals accepted {}, owner refused {}, \
                     wrong replays {}, replays never published {}, early wait timeouts {}, \
                     waiters not given the result {}, waiters not given the free claim {})",
                    c.violations(),
                    c.double_owners,
                    c.recomputes,
                    c.stale_publishes,
                    c.stale_renewals,
                    c.owner_refused,
                    c.wrong_replays,
                    c.unpublished_replays,
                    c.early_timeouts,
                    c.missed_results,
                    c.missed_claims
                );
                for v in &self.counters.violations {
                    let _ = writeln!(t, "    {v}");
                }
                if c.wall_clock_moved_ns >= 1_000_000 {
                    let _ = writeln!(
                        t,
                        "  wall clock    moved {:.3} ms against the monotonic clock during the run \
                         (servers time leases on it: allowed in every lease comparison)",
                        c.wall_clock_moved_ns as f64 / 1e6
                    );
                }
            }
            WorkloadSection::Lock => {
                let l = &self.counters.lock;
                let _ = writeln!(
                    t,
                    "  lock          acquired {}, contended {}, released {}, lost before release {}",
                    l.acquired, l.contended, l.released, l.lost
                );
            }
        }
        for f in &self.failures {
            let _ = writeln!(t, "  FAILED        {f}");
        }
        t
    }

    /// The same figures as a JSON document.
    pub fn json(&self) -> String {
        let mut latency: Vec<(String, Json)> = QUANTILES
            .iter()
            .map(|(label, q)| (label.to_string(), Json::Num(self.quantile_ms(*q))))
            .collect();
        latency.push(("max".into(), Json::Num(self.ms(self.hist.max()))));
        latency.push(("min".into(), Json::Num(self.ms(self.hist.min()))));
        latency.push(("mean".into(), Json::Num(self.hist.mean() / NS_PER_MS)));
        let errors = &self.counters.errors;
        let by_kind = Json::Obj(
            errors
                .sorted()
                .into_iter()
                .map(|(text, n)| (text, Json::Int(n)))
                .collect(),
        );
        let mut doc: Vec<(String, Json)> = self
            .settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        doc.extend([
            ("elapsed_s".into(), Json::Num(self.elapsed_s)),
            ("requests".into(), Json::Int(self.requests())),
            ("throughput_ops".into(), Json::Num(self.throughput())),
            ("latency_ms".into(), Json::Obj(latency)),
            (
                "errors".into(),
                Json::obj([("total", Json::Int(errors.total())), ("by_kind", by_kind)]),
            ),
        ]);
        if let Some(cl) = &self.cluster {
            let r = &self.counters.redirects;
            doc.push((
                "redirects".into(),
                Json::obj([
                    ("moved", Json::Int(r.moved)),
                    ("ask", Json::Int(r.ask)),
                    ("tryagain", Json::Int(r.tryagain)),
                    ("clusterdown", Json::Int(r.clusterdown)),
                    ("map_refreshes", Json::Int(cl.map_refreshes)),
                ]),
            ));
        }
        match self.workload {
            WorkloadSection::Plain => {}
            WorkloadSection::Claim => {
                let c = &self.counters.claim;
                let waits = &self.counters.dup_wait.0;
                let mut wait: Vec<(String, Json)> = vec![("count".into(), Json::Int(waits.len()))];
                wait.extend(
                    QUANTILES
                        .iter()
                        .map(|(label, q)| (label.to_string(), Json::Num(self.dup_wait_ms(*q)))),
                );
                wait.push(("max".into(), Json::Num(self.ms(waits.max()))));
                wait.push((
                    "mean".into(),
                    Json::Num(if waits.is_empty() {
                        0.0
                    } else {
                        waits.mean() / NS_PER_MS
                    }),
                ));
                doc.push((
                    "claim".into(),
                    Json::obj([
                        ("completed", Json::Int(c.completed)),
                        ("completed_per_s", Json::Num(self.completed_per_s())),
                        ("dup_wait_ms", Json::Obj(wait)),
                        ("dups_served_at_once", Json::Int(c.dups_served_at_once)),
                        (
                            "blocking_replies",
                            Json::Int(self.counters.blocking_replies),
                        ),
                        ("claims_won", Json::Int(c.claims_won)),
                        ("reclaims_after_lease", Json::Int(c.reclaims_after_lease)),
                        ("takeovers", Json::Int(c.takeovers)),
                        ("replays_served", Json::Int(c.replays_served)),
                        ("nils", Json::Int(c.nils)),
                        ("polls", Json::Int(c.polls)),
                        ("block_timeouts", Json::Int(c.block_timeouts)),
                        ("waiting_at_end", Json::Int(c.waiting_at_end)),
                        ("published", Json::Int(c.published)),
                        ("publish_refused", Json::Int(c.publish_refused)),
                        ("crashed", Json::Int(c.crashed)),
                        ("long_workers", Json::Int(c.long_workers)),
                        ("renewals", Json::Int(c.renewals)),
                        ("renew_refused", Json::Int(c.renew_refused)),
                        ("stalled", Json::Int(c.stalled)),
                        ("violations", Json::Int(c.violations())),
                        ("double_owners", Json::Int(c.double_owners)),
                        ("recomputes", Json::Int(c.recomputes)),
                        ("stale_publishes", Json::Int(c.stale_publishes)),
                        ("stale_renewals", Json::Int(c.stale_renewals)),
                        ("owner_refused", Json::Int(c.owner_refused)),
                        ("wrong_replays", Json::Int(c.wrong_replays)),
                        ("unpublished_replays", Json::Int(c.unpublished_replays)),
                        ("early_timeouts", Json::Int(c.early_timeouts)),
                        ("missed_results", Json::Int(c.missed_results)),
                        ("missed_claims", Json::Int(c.missed_claims)),
                        ("wall_clock_moved_ns", Json::Int(c.wall_clock_moved_ns)),
                        (
                            "violation_examples",
                            Json::Arr(self.counters.violations.iter().map(Json::str).collect()),
                        ),
                    ]),
                ));
            }
            WorkloadSection::Lock => {
                let l = &self.counters.lock;
                doc.push((
                    "lock".into(),
                    Json::obj([
                        ("acquired", Json::Int(l.acquired)),
                        ("contended", Json::Int(l.contended)),
                        ("released", Json::Int(l.released)),
                        ("lost", Json::Int(l.lost)),
                    ]),
                ));
            }
        }
        doc.push((
            "failures".into(),
            Json::Arr(self.failures.iter().map(Json::str).collect()),
        ));
        Json::Obj(doc).render()
    }
}

/// Writes `hist` (nanoseconds) as HdrHistogram's percentile distribution text, values in
/// milliseconds — byte for byte the layout of the Java `outputPercentileDistribution`
/// (and of wrk2 and HdrHistogram_c's `hdr_percentiles_print`), which plotters parse.
///
/// # Errors
/// Whatever writing to `out` returns.
pub fn write_hdr(hist: &Histogram<u64>, out: &mut impl Write) -> io::Result<()> {
    let digits = usize::from(HIST_SIGFIG);
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut total = 0u64;
    for v in hist.iter_quantiles(HDR_TICKS_PER_HALF_DISTANCE) {
        total += v.count_since_last_iteration();
        let value = v.value_iterated_to() as f64 / NS_PER_MS;
        let q = v.quantile_iterated_to();
        if q < 1.0 {
            writeln!(
                out,
                "{value:>12.digits$} {q:>2.12} {total:>10} {:>14.2}",
                1.0 / (1.0 - q)
            )?;
        } else {
            writeln!(out, "{value:>12.digits$} {q:>2.12} {total:>10}")?;
        }
    }
    let (mean, stdev, max) = if hist.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            hist.mean() / NS_PER_MS,
            hist.stdev() / NS_PER_MS,
            hist.max() as f64 / NS_PER_MS,
        )
    };
    let sub_buckets = (2 * 10u64.pow(u32::from(HIST_SIGFIG))).next_power_of_two();
    writeln!(
        out,
        "#[Mean    = {mean:>12.digits$}, StdDeviation   = {stdev:>12.digits$}]"
    )?;
    writeln!(
        out,
        "#[Max     = {max:>12.digits$}, Total count    = {:>12}]",
        hist.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {sub_buckets:>12}]",
        hist.buckets()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn hdr_text_layout() {
        let mut h = new_histogram();
        for i in 1..=1000u64 {
            h.record(i * 1000).unwrap(); // 1 µs … 1 ms
        }
        let mut out = Vec::new();
        write_hdr(&h, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("       Value     Percentile TotalCount 1/(1-Percentile)")
        );
        assert_eq!(lines.next(), Some(""));
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0], ["0.001", "0.000000000000", "1", "1.00"]);
        let last = rows.last().unwrap();
        assert_eq!(last[..3], ["1.000", "1.000000000000", "1000"]);
        assert_eq!(last.len(), 3, "the 100% row has no 1/(1-p)");
        // Values and counts never decrease.
        for w in rows.windows(2) {
            let v = |r: &Vec<&str>, i: usize| r[i].parse::<f64>().unwrap();
            assert!(v(&w[1], 0) >= v(&w[0], 0) && v(&w[1], 2) >= v(&w[0], 2));
        }
        assert!(
            text.contains("#[Max     =        1.000, Total count    =         1000]"),
            "{text}"
        );
        assert!(text.contains("SubBuckets     =         2048]"));
    }
}
