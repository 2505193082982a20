//! A container's usage read from its cgroup files, as cAdvisor reads them, for the containers
//! whose figures Docker's stats leave empty (some engines give none for a container that
//! joined another's network namespace, which every pod container does). cgroup v1 (`cpuacct`
//! and `memory` hierarchies) and v2 (one unified hierarchy).

use std::path::PathBuf;

/// A process' cgroup counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub cpu_usage_nanos: u64,
    pub memory_usage_bytes: u64,
    pub inactive_file_bytes: u64,
}

const ROOT: &str = "/sys/fs/cgroup";

/// The counters of the cgroup the process `pid` belongs to.
pub fn read(pid: i64) -> Result<Counters, String> {
    let membership =
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|e| format!("cannot read the cgroups of process {pid}: {e}"))?;
    let (v1, v2) = (directory(&membership, "cpuacct"), directory(&membership, ""));
    if let (Some(cpu), Some(memory)) = (v1, directory(&membership, "memory")) {
        return Ok(Counters {
            cpu_usage_nanos: number(&cpu.join("cpuacct.usage"))?,
            memory_usage_bytes: number(&memory.join("memory.usage_in_bytes"))?,
            inactive_file_bytes: field(&memory.join("memory.stat"), "total_inactive_file")?,
        });
    }
    let unified = v2.ok_or_else(|| format!("process {pid} is in no cpuacct cgroup and no unified one"))?;
    Ok(Counters {
        cpu_usage_nanos: field(&unified.join("cpu.stat"), "usage_usec")?.saturating_mul(1000),
        memory_usage_bytes: number(&unified.join("memory.current"))?,
        inactive_file_bytes: field(&unified.join("memory.stat"), "inactive_file")?,
    })
}

/// The directory of the hierarchy holding `controller` (`""`: the unified one) for a
/// process whose `/proc/PID/cgroup` is `membership`: `ID:CONTROLLERS:PATH` lines.
fn directory(membership: &str, controller: &str) -> Option<PathBuf> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = if controller.is_empty() { controllers.is_empty() } else { controllers.split(',').any(|c| c == controller) };
        let dir = PathBuf::from(ROOT).join(controllers).join(path.trim_start_matches('/'));
        (wanted && dir.is_dir()).then_some(dir)
    })
}

fn number(path: &std::path::Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.trim().parse().map_err(|_| format!("{} holds no number: {:?}", path.display(), text.trim()))
}

/// The value of `name` in a file of `NAME VALUE` lines; 0 when it is absent.
fn field(path: &std::path::Path, name: &str) -> Result<u64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text.lines().filter_map(|l| l.split_once(' ')).find(|(key, _)| *key == name).and_then(|(_, v)| v.trim().parse().ok()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own process is in some cgroup: its counters read, and it has used CPU.
    #[test]
    fn a_process_reads_its_own_cgroup_counters() {
        let counters = read(i64::from(std::process::id())).unwrap();
        assert!(counters.cpu_usage_nanos > 0 && counters.memory_usage_bytes > 0, "{counters:?}");
    }
}
