//! What the host's container may use (its cgroup's memory limit and CPU quota, as the kubelet
//! sets them from the pod's `resources.limits`), and the host-wide guest budgets that leaves.
//!
//! Read once at start, from `/proc/self/cgroup` and `/proc/self/mountinfo`: cgroup v2's
//! `memory.max` and `cpu.max`, or v1's `memory.limit_in_bytes` and `cpu.cfs_quota_us` (the
//! memory and CPU controllers may sit in different versions on a hybrid machine). A limit set
//! on any cgroup above the host's binds it too, so the tightest on the way up counts.
//!
//! The guests get what the host does not need for itself: its heap, its informers' caches,
//! compiled code, and a fraction of the CPU for its watches and Lease renewals. Both budgets
//! can be set by hand (`--guest-memory-budget`, `--guest-cpu-budget`).
//!
//! ```
//! use wasmloop::pod_limits::{PodLimits, guest_cpus, guest_memory};
//!
//! let pod = PodLimits { memory: Some(512 << 20), cpus: Some(1.0), physical_memory: 24 << 30, cores: 2.0 };
//! assert_eq!(guest_memory(&pod), 320 << 20);
//! assert_eq!(guest_cpus(&pod), 0.75);
//! ```

use std::path::{Path, PathBuf};

/// What the host may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodLimits {
    /// The memory limit, in bytes, when one is set.
    pub memory: Option<u64>,
    /// The CPU quota, in CPUs, when one is set.
    pub cpus: Option<f64>,
    /// The machine's memory.
    pub physical_memory: u64,
    /// The CPUs the host may be scheduled on.
    pub cores: f64,
}

/// What the host keeps for itself of a memory limit: its heap, caches, compiled code and
/// stacks. 192 MiB, or a quarter of a larger limit; never more than half.
pub fn host_memory_reserve(limit: u64) -> u64 {
    (192u64 << 20).max(limit / 4).min(limit / 2)
}

/// The guests' share of the CPU quota: the rest keeps the host's own work (watches, status
/// writes, Lease renewals) on time while guests spin.
pub const GUEST_CPU_SHARE: f64 = 0.75;

/// The guest memory budget for `pod`: its limit less the host's reserve, or without a limit
/// half the machine's memory.
pub fn guest_memory(pod: &PodLimits) -> u64 {
    match pod.memory {
        Some(limit) => limit - host_memory_reserve(limit),
        None => pod.physical_memory / 2,
    }
}

/// The guest CPU budget for `pod`: [`GUEST_CPU_SHARE`] of its quota, or of the CPUs it may run
/// on.
pub fn guest_cpus(pod: &PodLimits) -> f64 {
    pod.cpus.unwrap_or(pod.cores).max(0.01) * GUEST_CPU_SHARE
}

impl PodLimits {
    /// The limits of this process's cgroups, and the machine's.
    pub fn read() -> PodLimits {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let dirs = |controller| cgroup_dirs(&cgroups, &mounts, controller);
        let read = |path: &Path| std::fs::read_to_string(path).ok();
        let memory = dirs("memory").into_iter().filter_map(|(dir, v2)| memory_limit(&dir, v2, read)).min();
        let cpus = dirs("cpu").into_iter().filter_map(|(dir, v2)| cpu_quota(&dir, v2, read)).reduce(f64::min);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        PodLimits { memory, cpus, physical_memory: physical_memory(&meminfo).unwrap_or(1 << 30), cores }
    }
}

/// The memory limit set on cgroup directory `dir`, if any.
fn memory_limit(dir: &Path, v2: bool, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let file = if v2 { "memory.max" } else { "memory.limit_in_bytes" };
    let text = read(&dir.join(file))?;
    let bytes: u64 = text.trim().parse().ok()?;
    // cgroup v1 writes "no limit" as the largest page-aligned count.
    (bytes < 1 << 62).then_some(bytes)
}

/// The CPU quota set on cgroup directory `dir`, in CPUs, if any.
fn cpu_quota(dir: &Path, v2: bool, read: impl Fn(&Path) -> Option<String>) -> Option<f64> {
    let (quota, period) = if v2 {
        let text = read(&dir.join("cpu.max"))?;
        let mut words = text.split_whitespace();
        (words.next()?.to_owned(), words.next().unwrap_or("100000").to_owned())
    } else {
        (read(&dir.join("cpu.cfs_quota_us"))?, read(&dir.join("cpu.cfs_period_us"))?)
    };
    let (quota, period): (f64, f64) = (quota.trim().parse().ok()?, period.trim().parse().ok()?);
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// Every directory, from this process's cgroup up to its hierarchy's mount, where
/// `controller`'s limits for the process are set, and whether it is cgroup v2's: v1's
/// hierarchy of the controller when one is mounted, else the v2 hierarchy.
fn cgroup_dirs(cgroups: &str, mountinfo: &str, controller: &str) -> Vec<(PathBuf, bool)> {
    let v1 = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    });
    let (path, v2) = match v1 {
        Some(path) => (path, false),
        None => match cgroups.lines().find_map(|line| line.strip_prefix("0::")) {
            Some(path) => (path, true),
            None => return Vec::new(),
        },
    };
    let Some((root, mount)) = mount_of(mountinfo, controller, v2) else { return Vec::new() };
    // The process's path is relative to the hierarchy's root; the mount shows that root.
    let relative = path.strip_prefix(root.as_str()).unwrap_or(path).trim_start_matches('/');
    let mut dir = mount.join(relative);
    let mut dirs = Vec::new();
    loop {
        dirs.push((dir.clone(), v2));
        if dir == mount || !dir.pop() || !dir.starts_with(&mount) {
            break;
        }
    }
    dirs
}

/// The root and mount point of the hierarchy of `controller` (v1) or the v2 hierarchy.
fn mount_of(mountinfo: &str, controller: &str, v2: bool) -> Option<(String, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let (root, mount) = (fields.get(3)?, fields.get(4)?);
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        let matches = match v2 {
            true => fstype == "cgroup2",
            false => fstype == "cgroup" && options.split(',').any(|o| o == controller),
        };
        matches.then(|| ((*root).to_owned(), PathBuf::from(mount)))
    })
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn physical_memory(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const HYBRID_CGROUPS: &str = "9:name=systemd:/\n4:memory:/wasmloop-test\n2:cpuacct:/\n1:cpu:/wasmloop-test\n0::/\n";
    const HYBRID_MOUNTS: &str = "\
30 25 0:27 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
33 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory
38 25 0:35 / /sys/fs/cgroup/unified rw,relatime shared:17 - cgroup2 cgroup2 rw
";
    const V2_CGROUPS: &str = "0::/\n";
    const V2_MOUNTS: &str = "1200 1100 0:40 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw,nsdelegate\n";

    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries.iter().map(|(p, t)| (PathBuf::from(p), (*t).to_owned())).collect();
        move |path| map.get(path).cloned()
    }

    #[test]
    fn v1_limits_are_read_from_the_controllers_own_hierarchies_up_to_their_mounts() {
        let memory = cgroup_dirs(HYBRID_CGROUPS, HYBRID_MOUNTS, "memory");
        let dirs: Vec<_> = memory.iter().map(|(d, v2)| (d.to_str().unwrap(), *v2)).collect();
        assert_eq!(dirs, [("/sys/fs/cgroup/memory/wasmloop-test", false), ("/sys/fs/cgroup/memory", false)]);
        let read = files(&[
            ("/sys/fs/cgroup/memory/wasmloop-test/memory.limit_in_bytes", "536870912\n"),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
        ]);
        let limits: Vec<_> = memory.iter().filter_map(|(d, v2)| memory_limit(d, *v2, &read)).collect();
        assert_eq!(limits, [512 << 20], "the root's \"no limit\" is none");
        let cpu = cgroup_dirs(HYBRID_CGROUPS, HYBRID_MOUNTS, "cpu");
        let read = files(&[
            ("/sys/fs/cgroup/cpu/wasmloop-test/cpu.cfs_quota_us", "100000\n"),
            ("/sys/fs/cgroup/cpu/wasmloop-test/cpu.cfs_period_us", "100000\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"),
        ]);
        let quotas: Vec<_> = cpu.iter().filter_map(|(d, v2)| cpu_quota(d, *v2, &read)).collect();
        assert_eq!(quotas, [1.0]);
    }

    #[test]
    fn v2_limits_are_read_from_the_unified_hierarchy() {
        let dirs = cgroup_dirs(V2_CGROUPS, V2_MOUNTS, "memory");
        assert_eq!(dirs, [(PathBuf::from("/sys/fs/cgroup"), true)]);
        let read = files(&[("/sys/fs/cgroup/memory.max", "536870912\n"), ("/sys/fs/cgroup/cpu.max", "50000 100000\n")]);
        assert_eq!(memory_limit(&dirs[0].0, true, &read), Some(512 << 20));
        assert_eq!(cpu_quota(&dirs[0].0, true, &read), Some(0.5));
        let unlimited = files(&[("/sys/fs/cgroup/memory.max", "max\n"), ("/sys/fs/cgroup/cpu.max", "max 100000\n")]);
        assert_eq!(memory_limit(&dirs[0].0, true, &unlimited), None);
        assert_eq!(cpu_quota(&dirs[0].0, true, &unlimited), None);
    }

    #[test]
    fn a_process_outside_any_cgroup_hierarchy_has_no_limits() {
        assert!(cgroup_dirs("", "", "memory").is_empty());
        assert!(cgroup_dirs(V2_CGROUPS, "", "memory").is_empty());
    }

    #[test]
    fn the_guests_get_what_the_host_does_not_keep_for_itself() {
        let pod = |memory: Option<u64>, cpus| PodLimits { memory, cpus, physical_memory: 8 << 30, cores: 4.0 };
        let cases = [
            (pod(Some(512 << 20), Some(1.0)), 320 << 20, 0.75),
            (pod(Some(2 << 30), Some(2.0)), 1536 << 20, 1.5),
            (pod(Some(256 << 20), None), 128 << 20, 3.0),
            (pod(None, None), 4 << 30, 3.0),
        ];
        for (pod, memory, cpus) in cases {
            assert_eq!((guest_memory(&pod), guest_cpus(&pod)), (memory, cpus), "{pod:?}");
        }
    }

    #[test]
    fn physical_memory_is_read_from_meminfo() {
        assert_eq!(physical_memory("MemTotal:       24554404 kB\nMemFree: 1 kB\n"), Some(24554404 * 1024));
        assert_eq!(physical_memory("nothing"), None);
    }
}
