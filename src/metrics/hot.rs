//! Metrics recorded on the request path without sharing a cache line between cores.
//!
//! A prometheus `IntCounter` or `Histogram` is one set of atomics: every thread serving a
//! request adds to the same cache line, which then moves between cores on every request
//! (measured at 64 connections). Here every series keeps one row of cells per
//! shard, each row on cache lines of its own; a thread records into the shard it was dealt
//! when it first recorded (threads are dealt shards in turn), and a scrape sums the shards.
//! Recording is a relaxed `fetch_add` on a line that, as a rule, only one core touches.

use prometheus::core::{Collector, Desc};
use prometheus::proto;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Rows per series: more than the cores of any node a sidecar shares, so two threads running
/// at once rarely share one.
const SHARDS: usize = 32;
/// Cells per cache line (two lines: adjacent-line prefetching pairs them).
const PER_LINE: usize = 16;

#[repr(align(128))]
#[derive(Default)]
struct Line([AtomicU64; PER_LINE]);

/// The shard of the calling thread.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Relaxed) % SHARDS);
        }
        s.get()
    })
}

/// `n` cells per shard.
struct Cells {
    lines_per_shard: usize,
    lines: Box<[Line]>,
}

impl Cells {
    fn new(n: usize) -> Cells {
        let lines_per_shard = n.div_ceil(PER_LINE).max(1);
        Cells {
            lines_per_shard,
            lines: (0..lines_per_shard * SHARDS)
                .map(|_| Line::default())
                .collect(),
        }
    }

    fn cell(&self, shard: usize, i: usize) -> &AtomicU64 {
        &self.lines[shard * self.lines_per_shard + i / PER_LINE].0[i % PER_LINE]
    }

    fn total(&self, i: usize) -> u64 {
        (0..SHARDS).map(|s| self.cell(s, i).load(Relaxed)).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Histogram,
}

/// One metric family with a fixed set of series (label values known at start).
struct Family {
    desc: Desc,
    kind: Kind,
    /// Histograms: the buckets' upper bounds (`le`), ascending.
    bounds: Vec<f64>,
    /// Histograms: the sum is kept as an integer count of `unit`s (one `fetch_add`).
    unit: f64,
    series: Vec<(Vec<proto::LabelPair>, Cells)>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.desc.fq_name)
            .field("series", &self.series.len())
            .finish()
    }
}

impl Family {
    fn new(
        name: &str,
        help: &str,
        kind: Kind,
        (bounds, unit): (&[f64], f64),
        labels: &[&str],
        values: &[Vec<&str>],
    ) -> prometheus::Result<Family> {
        let desc = Desc::new(
            name.into(),
            help.into(),
            labels.iter().map(|l| l.to_string()).collect(),
            Default::default(),
        )?;
        // Histogram cells: one per bucket, then the count, then the sum (in units).
        let cells = match kind {
            Kind::Counter => 1,
            Kind::Histogram => bounds.len() + 2,
        };
        let series = values
            .iter()
            .map(|vals| {
                let pairs = labels
                    .iter()
                    .zip(vals)
                    .map(|(n, v)| {
                        let mut p = proto::LabelPair::default();
                        p.set_name(n.to_string());
                        p.set_value(v.to_string());
                        p
                    })
                    .collect();
                (pairs, Cells::new(cells))
            })
            .collect();
        Ok(Family {
            desc,
            kind,
            bounds: bounds.to_vec(),
            unit,
            series,
        })
    }

    fn metric(&self, (labels, cells): &(Vec<proto::LabelPair>, Cells)) -> proto::Metric {
        let mut m = proto::Metric::from_label(labels.clone());
        match self.kind {
            Kind::Counter => {
                let mut c = proto::Counter::default();
                c.set_value(cells.total(0) as f64);
                m.set_counter(c);
            }
            Kind::Histogram => {
                let n = self.bounds.len();
                let mut h = proto::Histogram::default();
                let mut cumulative = 0;
                let buckets = self
                    .bounds
                    .iter()
                    .enumerate()
                    .map(|(i, bound)| {
                        cumulative += cells.total(i);
                        let mut b = proto::Bucket::default();
                        b.set_upper_bound(*bound);
                        b.set_cumulative_count(cumulative);
                        b
                    })
                    .collect();
                h.set_bucket(buckets);
                // Read after the buckets: a sample recorded meanwhile can make the count
                // larger than the last bucket (it is `+Inf`'s), never smaller.
                h.set_sample_count(cells.total(n).max(cumulative));
                h.set_sample_sum(cells.total(n + 1) as f64 * self.unit);
                m.set_histogram(h);
            }
        }
        m
    }
}

/// Registers a family in a registry.
struct Collected(Arc<Family>);

impl Collector for Collected {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.0.desc]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        let f = &self.0;
        let mut mf = proto::MetricFamily::default();
        mf.set_name(f.desc.fq_name.clone());
        mf.set_help(f.desc.help.clone());
        mf.set_field_type(match f.kind {
            Kind::Counter => proto::MetricType::COUNTER,
            Kind::Histogram => proto::MetricType::HISTOGRAM,
        });
        mf.set_metric(f.series.iter().map(|s| f.metric(s)).collect());
        vec![mf]
    }
}

fn register(
    registry: &prometheus::Registry,
    family: prometheus::Result<Family>,
) -> prometheus::Result<Arc<Family>> {
    let family = Arc::new(family?);
    registry.register(Box::new(Collected(family.clone())))?;
    Ok(family)
}

/// One series of a sharded counter.
#[derive(Clone, Debug)]
pub struct HotCounter {
    family: Arc<Family>,
    series: usize,
}

impl HotCounter {
    /// Registers a counter family with one series per entry of `values` (label values in
    /// the order of `labels`), returned in that order.
    pub fn register(
        registry: &prometheus::Registry,
        name: &str,
        help: &str,
        labels: &[&str],
        values: &[Vec<&str>],
    ) -> prometheus::Result<Vec<HotCounter>> {
        let family = Family::new(name, help, Kind::Counter, (&[], 1.0), labels, values);
        let family = register(registry, family)?;
        Ok((0..values.len())
            .map(|series| HotCounter {
                family: family.clone(),
                series,
            })
            .collect())
    }

    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, v: u64) {
        self.family.series[self.series]
            .1
            .cell(shard(), 0)
            .fetch_add(v, Relaxed);
    }

    /// The total over every shard.
    pub fn get(&self) -> u64 {
        self.family.series[self.series].1.total(0)
    }
}

/// One series of a sharded histogram.
#[derive(Clone, Debug)]
pub struct HotHistogram {
    family: Arc<Family>,
    series: usize,
}

impl HotHistogram {
    /// Registers a histogram family with buckets `bounds` (ascending upper bounds), one
    /// series per entry of `values`, returned in that order. Samples are summed as whole
    /// multiples of `unit` (e.g. `1e-9` for seconds: nanoseconds; `1.0` for counts).
    pub fn register(
        registry: &prometheus::Registry,
        name: &str,
        help: &str,
        (bounds, unit): (&[f64], f64),
        labels: &[&str],
        values: &[Vec<&str>],
    ) -> prometheus::Result<Vec<HotHistogram>> {
        if !bounds.windows(2).all(|w| w[0] < w[1]) {
            return Err(prometheus::Error::Msg(format!(
                "{name}: bucket bounds must ascend"
            )));
        }
        let family = Family::new(name, help, Kind::Histogram, (bounds, unit), labels, values);
        let family = register(registry, family)?;
        Ok((0..values.len())
            .map(|series| HotHistogram {
                family: family.clone(),
                series,
            })
            .collect())
    }

    pub fn observe(&self, v: f64) {
        let f = &*self.family;
        let cells = &f.series[self.series].1;
        let s = shard();
        let n = f.bounds.len();
        let bucket = f.bounds.partition_point(|b| *b < v);
        if bucket < n {
            cells.cell(s, bucket).fetch_add(1, Relaxed);
        }
        // Negative samples (none is recorded here) would count as 0 in the sum.
        let units = (v / f.unit).round().max(0.0) as u64;
        cells.cell(s, n + 1).fetch_add(units, Relaxed);
        cells.cell(s, n).fetch_add(1, Relaxed);
    }

    /// Samples recorded, over every shard.
    pub fn sample_count(&self) -> u64 {
        self.family.series[self.series]
            .1
            .total(self.family.bounds.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, Registry, TextEncoder};

    fn render(r: &Registry) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&r.gather(), &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    /// Many threads (more than the shards) record at once; the scrape sums exactly.
    #[test]
    fn shards_sum_to_every_recording() {
        let r = Registry::new();
        let c = HotCounter::register(&r, "t_total", "h", &["k"], &[vec!["a"], vec!["b"]]).unwrap();
        let h = HotHistogram::register(&r, "t_seconds", "h", (&[1.0, 2.0], 0.5), &[], &[vec![]])
            .unwrap()
            .remove(0);
        std::thread::scope(|s| {
            for t in 0..(SHARDS + 8) {
                let (c, h) = (&c, &h);
                s.spawn(move || {
                    for i in 0..1_000u64 {
                        c[t % 2].inc_by(2);
                        h.observe((i % 3) as f64 + 0.5);
                    }
                });
            }
        });
        let threads = (SHARDS + 8) as u64;
        assert_eq!(c[0].get() + c[1].get(), threads * 2_000);
        assert_eq!(h.sample_count(), threads * 1_000);
        let text = render(&r);
        assert!(text.contains("t_total{k=\"a\"} 40000"), "{text}");
        assert!(text.contains("t_total{k=\"b\"} 40000"), "{text}");
        // 0.5, 1.5, 2.5 in turn: 334 + 333 + 333 per thread.
        assert!(text.contains(&format!("t_seconds_bucket{{le=\"1\"}} {}", threads * 334)));
        assert!(text.contains(&format!("t_seconds_bucket{{le=\"2\"}} {}", threads * 667)));
        assert!(text.contains(&format!(
            "t_seconds_bucket{{le=\"+Inf\"}} {}",
            threads * 1_000
        )));
        let sum: f64 = threads as f64 * (334.0 * 0.5 + 333.0 * 1.5 + 333.0 * 2.5);
        assert!(text.contains(&format!("t_seconds_sum {sum}")), "{text}");
    }

    #[test]
    fn bounds_must_ascend_and_names_be_unique() {
        let r = Registry::new();
        assert!(HotHistogram::register(&r, "x", "h", (&[2.0, 1.0], 1.0), &[], &[vec![]]).is_err());
        HotCounter::register(&r, "y_total", "h", &[], &[vec![]]).unwrap();
        assert!(HotCounter::register(&r, "y_total", "h", &[], &[vec![]]).is_err());
    }
}
