//! A real cgroup with the host pod's limits, as the kubelet would make it: the memory limit and
//! CPU quota of `deploy/base/deployment.yaml`, enforced by the kernel (the OOM killer, CFS
//! throttling). Root makes it (v1: `/sys/fs/cgroup/memory/NAME` and `/sys/fs/cgroup/cpu/NAME`;
//! v2: `/sys/fs/cgroup/NAME` with `memory.max` and `cpu.max`); it goes when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const DEPLOYMENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/deployment.yaml");

/// The `resources.limits` of the host container in `deploy/`: memory in bytes, CPU in
/// millicores.
pub fn deploy_limits() -> (u64, u64) {
    let text = std::fs::read_to_string(DEPLOYMENT).unwrap();
    let documents: Vec<Value> =
        serde_saphyr::from_multiple_with_options(&text, wasmloop::input::yaml_options()).expect("deployment.yaml");
    let deployment = documents.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment in deploy/");
    let limits = &deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
    let memory = limits["memory"].as_str().expect("a memory limit");
    let memory: u64 = match memory.strip_suffix("Mi") {
        Some(mib) => mib.parse::<u64>().unwrap() << 20,
        None => memory.strip_suffix("Gi").expect("Mi or Gi").parse::<u64>().unwrap() << 30,
    };
    let cpu = limits["cpu"].as_str().expect("a CPU limit");
    let millicores = match cpu.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => cpu.parse::<u64>().unwrap() * 1000,
    };
    (memory, millicores)
}

/// A cgroup made for one test, removed when dropped (after the processes in it are gone).
pub struct PodCgroup {
    /// Where its memory limit is set.
    memory: PathBuf,
    /// Where its CPU quota is set (the same directory under v2).
    cpu: PathBuf,
    v2: bool,
}

impl PodCgroup {
    /// A cgroup named `wasmloop-NAME-PID` with `memory` bytes and `millicores` of CPU.
    pub fn new(name: &str, memory: u64, millicores: u64) -> PodCgroup {
        let name = format!("wasmloop-{name}-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists();
        let cgroup = if v1 {
            let memory = Path::new("/sys/fs/cgroup/memory").join(&name);
            let cpu = Path::new("/sys/fs/cgroup/cpu").join(&name);
            PodCgroup { memory, cpu, v2: false }
        } else {
            let dir = Path::new("/sys/fs/cgroup").join(&name);
            PodCgroup { memory: dir.clone(), cpu: dir, v2: true }
        };
        for dir in [&cgroup.memory, &cgroup.cpu] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| {
                panic!("cannot make cgroup {} ({e}): these tests run as root on a machine with cgroups", dir.display())
            });
        }
        let period = 100_000;
        let quota = millicores * period / 1000;
        if cgroup.v2 {
            cgroup.write(&cgroup.memory, "memory.max", &memory.to_string());
            cgroup.write(&cgroup.cpu, "cpu.max", &format!("{quota} {period}"));
        } else {
            cgroup.write(&cgroup.memory, "memory.limit_in_bytes", &memory.to_string());
            cgroup.write(&cgroup.cpu, "cpu.cfs_period_us", &period.to_string());
            cgroup.write(&cgroup.cpu, "cpu.cfs_quota_us", &quota.to_string());
        }
        cgroup
    }

    /// A cgroup with the limits of the host pod in `deploy/`.
    pub fn like_the_pod(name: &str) -> PodCgroup {
        let (memory, millicores) = deploy_limits();
        PodCgroup::new(name, memory, millicores)
    }

    fn write(&self, dir: &Path, file: &str, value: &str) {
        std::fs::write(dir.join(file), value).unwrap_or_else(|e| panic!("{}/{file} = {value}: {e}", dir.display()));
    }

    /// `program` with `args`, started inside this cgroup: a shell moves itself in, then execs
    /// it, so the program's every allocation counts.
    pub fn command(&self, program: &Path, args: &[std::ffi::OsString]) -> Command {
        let mut procs = vec![self.memory.join("cgroup.procs")];
        if self.cpu != self.memory {
            procs.push(self.cpu.join("cgroup.procs"));
        }
        let moves: Vec<String> = procs.iter().map(|p| format!("echo $$ > {}", p.display())).collect();
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("{} && exec \"$0\" \"$@\"", moves.join(" && "))).arg(program).args(args);
        command
    }

    /// How often the kernel's OOM killer killed a process of this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 { ("memory.events", "oom_kill ") } else { ("memory.oom_control", "oom_kill ") };
        let text = std::fs::read_to_string(self.memory.join(file)).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix(key)).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        // A killed process leaves its cgroup a moment after `wait` returns.
        for dir in [&self.memory, &self.cpu] {
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}
