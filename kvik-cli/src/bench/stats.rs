//! Repetitions to figures: median, min and max throughput, the spread, and
//! ratios between figures.

/// A spread (max − min) above this share of the median marks a figure as
/// noisy in the table (`~`) and in the JSON (`noisy: true`).
pub const NOISY_SPREAD: f64 = 0.25;

/// Throughput over repetitions, in bytes per second.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every repetition, in the order measured.
    pub samples: Vec<f64>,
    /// `(max - min) / median`.
    pub spread: f64,
    pub noisy: bool,
}

impl Summary {
    /// Figures from throughputs (bytes per second); `None` when there are none
    /// or any is not a finite, non-negative number.
    pub fn from_rates(samples: Vec<f64>) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|r| !r.is_finite() || *r < 0.0) {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let (min, max) = (sorted[0], sorted[n - 1]);
        let spread = if median > 0.0 {
            (max - min) / median
        } else {
            0.0
        };
        Some(Summary {
            median,
            min,
            max,
            samples,
            spread,
            noisy: spread > NOISY_SPREAD,
        })
    }

    /// Figures reported by another tool that kept no samples.
    pub fn from_figures(median: f64, min: f64, max: f64) -> Option<Summary> {
        let mut s = Summary::from_rates(vec![min, median, max])?;
        s.median = median;
        s.samples.clear();
        Some(s)
    }

    /// Figures from the seconds each repetition of `bytes` took.
    pub fn from_seconds(bytes: u64, seconds: &[f64]) -> Option<Summary> {
        if seconds.iter().any(|s| !s.is_finite() || *s <= 0.0) {
            return None;
        }
        Summary::from_rates(seconds.iter().map(|s| bytes as f64 / s).collect())
    }
}

/// `ours / reference`, when both exist and the reference is not zero.
pub fn ratio(ours: f64, reference: Option<f64>) -> Option<f64> {
    match reference {
        Some(r) if r > 0.0 && ours.is_finite() => Some(ours / r),
        _ => None,
    }
}

/// `12.34` (GB/s, decimal, as dd and fio write them).
pub fn gbps(bytes_per_second: f64) -> String {
    format!("{:.2}", bytes_per_second / 1e9)
}

/// `0.87×`, or `-` when there is no ratio.
pub fn times(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) => format!("{r:.2}×"),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let odd = Summary::from_rates(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max), (2.0, 1.0, 3.0));
        let even = Summary::from_rates(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((even.median, even.min, even.max), (2.5, 1.0, 4.0));
        // Samples stay in the order measured.
        assert_eq!(even.samples, vec![4.0, 1.0, 3.0, 2.0]);
    }

    #[test]
    fn spread_marks_noise() {
        let steady = Summary::from_rates(vec![10.0, 10.5, 9.8]).unwrap();
        assert!((steady.spread - 0.07).abs() < 1e-9, "{}", steady.spread);
        assert!(!steady.noisy);
        let noisy = Summary::from_rates(vec![10.0, 6.0, 10.0]).unwrap();
        assert!((noisy.spread - 0.4).abs() < 1e-9);
        assert!(noisy.noisy);
    }

    #[test]
    fn nothing_or_nonsense_gives_no_summary() {
        assert_eq!(Summary::from_rates(vec![]), None);
        assert_eq!(Summary::from_rates(vec![1.0, f64::NAN]), None);
        assert_eq!(Summary::from_rates(vec![-1.0]), None);
        assert_eq!(Summary::from_seconds(10, &[0.0]), None);
    }

    #[test]
    fn another_tools_figures_keep_its_median() {
        let s = Summary::from_figures(5e9, 4e9, 6e9).unwrap();
        assert_eq!((s.median, s.min, s.max), (5e9, 4e9, 6e9));
        assert!(s.samples.is_empty());
        assert!((s.spread - 0.4).abs() < 1e-9);
    }

    #[test]
    fn seconds_become_rates() {
        let s = Summary::from_seconds(1_000_000_000, &[0.5, 0.25, 1.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2e9, 1e9, 4e9));
    }

    #[test]
    fn ratios_need_a_reference() {
        assert_eq!(ratio(5.0, Some(2.0)), Some(2.5));
        assert_eq!(ratio(5.0, Some(0.0)), None);
        assert_eq!(ratio(5.0, None), None);
        assert_eq!(times(Some(0.874)), "0.87×");
        assert_eq!(times(None), "-");
        assert_eq!(gbps(12_345_000_000.0), "12.35");
    }
}
