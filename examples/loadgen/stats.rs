//! Medians, percentiles and resident memory.

use super::*;

pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(crate) struct Stats {
    pub(crate) name: String,
    pub(crate) conns: usize,
    pub(crate) requests: usize,
    pub(crate) ids: usize,
    pub(crate) elapsed: Duration,
    pub(crate) lat: Vec<Duration>,
}

impl Stats {
    pub(crate) fn print(&mut self) {
        self.lat.sort();
        let rate = self.ids as f64 / self.elapsed.as_secs_f64();
        println!(
            "{:<22} {:>5} {:>9} {:>12.0} {:>10.1?} {:>10.1?} {:>10.1?}",
            self.name,
            self.conns,
            self.requests,
            rate,
            percentile(&self.lat, 0.5),
            percentile(&self.lat, 0.99),
            percentile(&self.lat, 0.999),
        );
    }
}

pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
