//! CPU lists in the kernel's list format ("0-3,8,10-11"), as in /sys/devices/system/cpu/online,
//! /proc/irq/N/smp_affinity_list and the isolcpus= / nohz_full= boot parameters.

use std::collections::BTreeSet;
use std::fmt;

/// More CPUs than any list may name: bounds what a malformed range like "0-4000000000" costs.
pub const MAX_CPUS: usize = 8192;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<usize>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid CPU list {0:?}")]
pub struct CpuListError(pub String);

impl CpuSet {
    pub fn parse(text: &str) -> Result<CpuSet, CpuListError> {
        let bad = || CpuListError(text.to_string());
        let mut cpus = BTreeSet::new();
        for part in text.trim().split(',').filter(|p| !p.is_empty()) {
            let (low, high) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
                None => (part.trim().parse::<usize>(), part.trim().parse::<usize>()),
            };
            let (low, high) = (low.map_err(|_| bad())?, high.map_err(|_| bad())?);
            if low > high || high >= MAX_CPUS {
                return Err(bad());
            }
            cpus.extend(low..=high);
        }
        Ok(CpuSet(cpus))
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        CpuSet(cpus.into_iter().collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn contains(&self, cpu: usize) -> bool {
        self.0.contains(&cpu)
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        !self.0.is_disjoint(&other.0)
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut cpus = self.0.iter().copied().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end = cpus.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_kernel_list_format() {
        let set = CpuSet::parse("0-3,8,10-11\n").unwrap();
        assert_eq!(set.len(), 7);
        assert_eq!(set.to_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse("").unwrap().to_string(), "");
        assert!(CpuSet::parse("3-1").is_err());
        assert!(CpuSet::parse("0-99999999").is_err());
        assert!(CpuSet::parse("a").is_err());
    }
}
