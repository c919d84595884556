//! CPU: frequency governor, NIC interrupts kept off shard cores, core isolation, clocksource.

use crate::context::Context;
use crate::cpuset::CpuSet;
use crate::finding::{write, Action, Finding, Severity};

pub fn governor(ctx: &Context) -> Vec<Finding> {
    let finding = Finding::new("cpu_governor", "cpu governor")
        .wanted("performance")
        .reason("a shard busy-polls its rings; down-clocking between bursts adds latency");
    let mut slow = Vec::new();
    let mut seen = Vec::new();
    let mut modes = Vec::new();
    let mut actions = Vec::new();
    for cpu in ctx.shards().iter() {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let Ok(mode) = ctx.root.read(&format!("{dir}/scaling_governor")) else {
            continue;
        };
        seen.push(cpu);
        if mode.trim() != "performance" {
            slow.push(cpu);
            if !modes.contains(&mode) {
                modes.push(mode.clone());
            }
            let offered = ctx
                .root
                .read(&format!("{dir}/scaling_available_governors"))
                .map(|list| list.split_whitespace().any(|g| g == "performance"))
                .unwrap_or(true);
            if offered {
                actions.push(write(format!("{dir}/scaling_governor"), "performance"));
            }
        }
    }
    if seen.is_empty() {
        return vec![finding.unknown("no cpufreq (VM or fixed clock)")];
    }
    let current = if slow.is_empty() {
        "performance".to_string()
    } else {
        format!(
            "{} on cpu {}",
            modes.join("/"),
            CpuSet::from_cpus(slow.clone())
        )
    };
    vec![finding
        .current(current)
        .judged(slow.is_empty(), Severity::Warning, actions)]
}

/// The IRQ numbers of a network interface: its device's MSI vectors (for virtio, those of
/// the PCI function above it) and the /proc/interrupts lines that name it.
fn nic_irqs(ctx: &Context, nic: &str) -> Vec<u32> {
    let device = format!("/sys/class/net/{nic}/device");
    let mut irqs: Vec<u32> = ctx
        .root
        .list(&format!("{device}/msi_irqs"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    let mut names = vec![nic.to_string()];
    if let Some(real) = ctx.root.resolve(&device) {
        if let Some((parent, leaf)) = real.rsplit_once('/') {
            if leaf.starts_with("virtio") {
                names.push(leaf.to_string());
                if irqs.is_empty() {
                    irqs.extend(
                        ctx.root
                            .list(&format!("{parent}/msi_irqs"))
                            .iter()
                            .filter_map(|n| n.parse::<u32>().ok()),
                    );
                }
            }
        }
    }
    if let Ok(table) = ctx.root.read("/proc/interrupts") {
        for line in table.lines() {
            let Some((number, rest)) = line.trim_start().split_once(':') else {
                continue;
            };
            let Ok(irq) = number.parse::<u32>() else {
                continue;
            };
            let Some(name) = rest.split_whitespace().next_back() else {
                continue;
            };
            let named = names.iter().any(|n| {
                name == n
                    || name.starts_with(&format!("{n}-"))
                    || name.starts_with(&format!("{n}."))
            });
            if named && !irqs.contains(&irq) {
                irqs.push(irq);
            }
        }
    }
    irqs.sort_unstable();
    irqs
}

pub fn irq_affinity(ctx: &Context) -> Vec<Finding> {
    let shards = ctx.shards();
    let spare = ctx.spare_cores();
    let nics: Vec<String> = ctx
        .root
        .list("/sys/class/net")
        .into_iter()
        .filter(|nic| ctx.root.exists(&format!("/sys/class/net/{nic}/device")))
        .collect();
    let mut findings = Vec::new();
    for nic in nics {
        let finding = Finding::new("irq_affinity", format!("{nic} irq affinity"));
        let irqs = nic_irqs(ctx, &nic);
        if irqs.is_empty() {
            findings.push(finding.wanted("off shard cores").unknown("no IRQs found"));
            continue;
        }
        if spare.is_empty() {
            findings.push(
                finding
                    .current(format!("{} IRQs, every core runs a shard", irqs.len()))
                    .wanted("spread over all cores")
                    .reason("no spare core: leave IRQs spread (use --shard-cores to keep some)"),
            );
            continue;
        }
        let mut on_shards = Vec::new();
        let mut actions = Vec::new();
        for irq in &irqs {
            let path = format!("/proc/irq/{irq}/smp_affinity_list");
            let Ok(Ok(affinity)) = ctx.root.read(&path).map(|t| CpuSet::parse(&t)) else {
                continue;
            };
            if affinity.intersects(&shards) {
                on_shards.push(*irq);
                actions.push(write(path, spare.to_string()));
            }
        }
        let current = if on_shards.is_empty() {
            format!("{} IRQs off shard cores", irqs.len())
        } else {
            let list: Vec<String> = on_shards.iter().map(|i| i.to_string()).collect();
            format!("IRQ {} on shard cores", list.join(","))
        };
        findings.push(
            finding
                .current(current)
                .wanted(format!("cpu {spare}"))
                .reason("softirq work on a shard core steals its loop (stop irqbalance or ban the cores)")
                .judged(on_shards.is_empty(), Severity::Warning, actions),
        );
    }
    if findings.is_empty() {
        findings.push(
            Finding::new("irq_affinity", "nic irq affinity")
                .wanted("off shard cores")
                .unknown("no physical NIC"),
        );
    }
    findings
}

/// The CPU list of a boot parameter, without isolcpus' flags ("managed_irq,domain,2-5").
fn boot_cpus(cmdline: &str, key: &str) -> Option<CpuSet> {
    let value = cmdline
        .split_whitespace()
        .filter_map(|arg| arg.strip_prefix(key)?.strip_prefix('='))
        .next_back()?;
    let list: Vec<&str> = value
        .split(',')
        .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    CpuSet::parse(&list.join(",")).ok()
}

pub fn isolation(ctx: &Context) -> Vec<Finding> {
    let cmdline = match ctx.root.read("/proc/cmdline") {
        Ok(text) => text,
        Err(_) => {
            return ["isolcpus", "nohz_full"]
                .iter()
                .map(|key| Finding::new("isolcpus", *key).unknown("no /proc/cmdline"))
                .collect()
        }
    };
    let shards = ctx.shards();
    let spare = ctx.spare_cores();
    let reasons = [
        (
            "isolcpus",
            "keeps other tasks off shard cores (boot parameter: reboot needed)",
        ),
        (
            "nohz_full",
            "stops the timer tick on a shard core running one thread (reboot needed)",
        ),
    ];
    reasons
        .iter()
        .map(|(key, reason)| {
            let current = boot_cpus(&cmdline, key);
            let shown = current
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "unset".to_string());
            let finding = Finding::new("isolcpus", *key)
                .current(shown)
                .reason(*reason);
            if spare.is_empty() {
                return finding
                    .wanted("unset (every core runs a shard)")
                    .reason("the OS needs a core of its own; isolate only with --shard-cores");
            }
            let met = current.as_ref().is_some_and(|c| shards.is_subset(c));
            finding.wanted(shards.to_string()).judged(
                met,
                Severity::Info,
                vec![Action::KernelCmdline {
                    add: format!("{key}={shards}"),
                }],
            )
        })
        .collect()
}

pub fn clocksource(ctx: &Context) -> Vec<Finding> {
    const DIR: &str = "/sys/devices/system/clocksource/clocksource0";
    let finding = Finding::new("clocksource", "clocksource")
        .wanted("tsc")
        .reason("clock_gettime runs in the vDSO only on tsc; every request reads the clock");
    let Ok(current) = ctx.root.read(&format!("{DIR}/current_clocksource")) else {
        return vec![finding.unknown("not exposed")];
    };
    let offered = ctx
        .root
        .read(&format!("{DIR}/available_clocksource"))
        .map(|list| list.split_whitespace().any(|s| s == "tsc"))
        .unwrap_or(false);
    let current = current.trim().to_string();
    if current != "tsc" && !offered {
        return vec![finding
            .current(current)
            .wanted("tsc (not offered)")
            .reason("the kernel does not offer tsc here (other arch or unstable TSC)")];
    }
    let met = current == "tsc";
    vec![finding.current(current).judged(
        met,
        Severity::Warning,
        vec![write(format!("{DIR}/current_clocksource"), "tsc")],
    )]
}
