//! What a result file says about where and when it was measured.

use std::path::Path;

/// The machine a run measured, as far as it can be told without privileges.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub hostname: Option<String>,
    pub cpu: Option<String>,
    /// Cores this process may run on.
    pub cores: usize,
    pub memory_bytes: Option<u64>,
    pub kernel: Option<String>,
    pub os: Option<String>,
    /// The filesystem of the benchmark file (statfs).
    pub filesystem: Option<String>,
    /// The block device behind it (`/dev/vda`), from /proc/self/mounts.
    pub device: Option<String>,
    /// `CUDA driver 13.0: NVIDIA H200`, or why there is none.
    pub gpu: String,
    /// /proc/loadavg's 1-minute figure at the start and at the end.
    pub load_average_start: Option<f64>,
    pub load_average_end: Option<f64>,
}

impl Machine {
    /// Describe this machine; `file` is the benchmark file.
    pub fn describe(file: &Path) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let cpu = read("/proc/cpuinfo").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string())
        });
        let memory_bytes = read("/proc/meminfo").and_then(|t| meminfo_total(&t));
        let os = read("/etc/os-release").and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
        let gpu = match gds_core::cuda::probe() {
            Ok(d) => format!(
                "CUDA driver {}: {}",
                d.version_string(),
                d.devices.join(", ")
            ),
            Err(e) => format!("none ({e})"),
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        Machine {
            hostname: read("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").map(|k| k.trim().to_string()),
            os,
            filesystem: gds_core::platform::filesystem(dir).ok().map(|f| f.name),
            device: read("/proc/self/mounts").and_then(|m| mount_source(&m, &absolute(dir))),
            gpu,
            load_average_start: load_average(),
            load_average_end: None,
        }
    }

    /// A note when other processes were running at the start (the load
    /// average above 0.5): figures are then noisier than the machine.
    pub fn busy_note(&self) -> Option<String> {
        let load = self.load_average_start.filter(|&load| load > 0.5)?;
        Some(format!(
            "load average {load:.2} at the start on {} cores: other processes were running; \
             read the spreads (min–max) before the medians",
            self.cores
        ))
    }

    /// One line for the report's header.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!(
            "{}, {} cores",
            self.cpu.as_deref().unwrap_or("unknown CPU"),
            self.cores
        )];
        if let Some(m) = self.memory_bytes {
            parts.push(format!("{:.0} GiB", m as f64 / (1u64 << 30) as f64));
        }
        if let Some(k) = &self.kernel {
            parts.push(format!("Linux {k}"));
        }
        match (&self.filesystem, &self.device) {
            (Some(fs), Some(dev)) => parts.push(format!("{fs} on {dev}")),
            (Some(fs), None) => parts.push(fs.clone()),
            _ => {}
        }
        parts.push(format!("GPU: {}", self.gpu));
        parts.join(", ")
    }
}

fn absolute(path: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `MemTotal` in bytes.
fn meminfo_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The source of the mount that holds `path`: the longest mount point that
/// is a prefix of it.
fn mount_source(mounts: &str, path: &Path) -> Option<String> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            Some((fields.next()?, fields.next()?))
        })
        .filter(|(_, point)| path.starts_with(point))
        .max_by_key(|(_, point)| point.len())
        .map(|(source, _)| source.to_string())
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Now, as `2026-05-01T12:34:56Z`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since the Unix epoch as an RFC 3339 UTC time (days to a civil
/// date with Howard Hinnant's algorithm).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_767_225_599), "2025-12-31T23:59:59Z");
        assert_eq!(utc(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn meminfo_and_mounts() {
        assert_eq!(
            meminfo_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000 * 1024)
        );
        let mounts = "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n\
                      /dev/nvme0n1 /data xfs rw 0 0\n";
        assert_eq!(
            mount_source(mounts, Path::new("/data/x")).as_deref(),
            Some("/dev/nvme0n1")
        );
        assert_eq!(
            mount_source(mounts, Path::new("/tmp")).as_deref(),
            Some("tmpfs")
        );
        assert_eq!(
            mount_source(mounts, Path::new("/work")).as_deref(),
            Some("/dev/vda")
        );
    }

    #[test]
    fn this_machine_has_cores_and_a_summary() {
        let m = Machine::describe(&std::env::temp_dir().join("x"));
        assert!(m.cores >= 1);
        assert!(m.summary().contains(&format!("{} cores", m.cores)));
    }
}
