//! Every tuner against a fake /proc and /sys built here: check reports the right current
//! value, wanted value and severity; `apply --yes` writes exactly the expected files; the dry
//! run and `--script` write nothing; the script holds the expected commands.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use clap::Parser;
use tuning::cli::{run, TuneCommand};
use tuning::{check, Action, Context, CpuSet, Finding, Root, Severity};

const NVME: &str = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
const DATA_DIR: &str = "/var/lib/broker";

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn empty() -> Fake {
        Fake {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn file(&self, path: &str, contents: &str) -> &Fake {
        let full = self.dir.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, contents).unwrap();
        self
    }

    fn dir(&self, path: &str) -> &Fake {
        fs::create_dir_all(self.dir.path().join(path)).unwrap();
        self
    }

    fn symlink(&self, link: &str, target: &str) -> &Fake {
        let full = self.dir.path().join(link);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, full).unwrap();
        self
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn ctx(&self) -> Context {
        let mut ctx = Context::new(Root::new(self.path()), DATA_DIR);
        ctx.shard_cores = Some(CpuSet::parse("1-3").unwrap());
        ctx
    }

    /// Every path under the root with its contents ("-> target" for links, "/" for dirs).
    fn snapshot(&self) -> BTreeMap<String, String> {
        fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
            for entry in fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.strip_prefix(base).unwrap().display().to_string();
                let meta = fs::symlink_metadata(&path).unwrap();
                if meta.file_type().is_symlink() {
                    let target = fs::read_link(&path).unwrap();
                    out.insert(name, format!("-> {}", target.display()));
                } else if meta.is_dir() {
                    out.insert(format!("{name}/"), String::new());
                    walk(base, &path, out);
                } else {
                    out.insert(name, fs::read_to_string(&path).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.path(), self.path(), &mut out);
        out
    }

    /// Runs the command line with `--root` and the shard cores added, returning its output.
    fn run(&self, args: &[&str]) -> (i32, String) {
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: TuneCommand,
        }
        let root = self.path().display().to_string();
        let mut argv = vec!["tuning"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&[
            "--root",
            &root,
            "--data-dir",
            DATA_DIR,
            "--shard-cores",
            "1-3",
        ]);
        let cli = Cli::try_parse_from(argv).unwrap();
        let mut out = Vec::new();
        let code = run(cli.command, &mut out).unwrap();
        (code, String::from_utf8(out).unwrap())
    }
}

/// The parts every tree shares: four CPUs, a NIC with MSI vectors, a partitioned NVMe disk
/// under /var/lib (over a hidden tmpfs mount there), / on a SATA disk, a loopback interface.
fn skeleton() -> Fake {
    let fake = Fake::empty();
    fake.file("sys/devices/system/cpu/online", "0-3\n")
        .dir("sys/class/net/lo")
        .file("sys/class/net/eth0/device/msi_irqs/40", "msix\n")
        .file("sys/class/net/eth0/device/msi_irqs/41", "msix\n")
        .file("sys/class/net/eth0/device/msi_irqs/42", "msix\n")
        .file(
            "proc/interrupts",
            "           CPU0       CPU1       CPU2       CPU3\n  \
             40:   1   2   3   4  IR-PCI-MSI 524288-edge  eth0-TxRx-0\n  \
             50:   1   2   3   4  IR-PCI-MSI 524289-edge  eth0-TxRx-3\n  \
             60:   1   2   3   4  IR-PCI-MSI 524290-edge  nvme0q1\n",
        )
        .file(
            "proc/self/mountinfo",
            "27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n\
             30 27 0:50 / /var/lib rw - tmpfs tmpfs rw\n\
             31 27 259:1 / /var/lib rw,noatime - xfs /dev/nvme0n1p1 rw\n\
             32 27 0:22 / /sys rw - sysfs sysfs rw\n",
        )
        .symlink(
            "sys/dev/block/259:1",
            "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/nvme0n1p1",
        )
        .file(&format!("{NVME}/nvme0n1p1/partition"), "1\n")
        .file(&format!("{NVME}/queue/rotational"), "0\n")
        .file("proc/sys/kernel/osrelease", "6.8.0-test\n")
        .file("proc/sys/vm/dirty_background_bytes", "0\n")
        .file("proc/sys/vm/dirty_bytes", "0\n");
    fake
}

/// A host where every tuner falls short.
fn untuned() -> Fake {
    let fake = skeleton();
    for cpu in 0..4 {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        fake.file(&format!("{dir}/scaling_governor"), "powersave\n")
            .file(
                &format!("{dir}/scaling_available_governors"),
                "performance powersave\n",
            );
    }
    fake.file("proc/irq/40/smp_affinity_list", "0-3\n")
        .file("proc/irq/41/smp_affinity_list", "0\n")
        .file("proc/irq/42/smp_affinity_list", "2\n")
        .file("proc/irq/50/smp_affinity_list", "3\n")
        .file(
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=managed_irq,domain,1-2 quiet\n",
        )
        .file(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "kvm-clock\n",
        )
        .file(
            "sys/devices/system/clocksource/clocksource0/available_clocksource",
            "tsc kvm-clock acpi_pm \n",
        )
        .file(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never\n",
        )
        .file(
            "sys/kernel/mm/transparent_hugepage/defrag",
            "[always] defer defer+madvise madvise never\n",
        )
        .file("proc/sys/vm/swappiness", "60\n")
        .file("proc/sys/vm/dirty_background_ratio", "10\n")
        .file("proc/sys/vm/dirty_ratio", "20\n")
        .file("proc/sys/vm/dirty_expire_centisecs", "6000\n")
        .file("proc/sys/vm/dirty_writeback_centisecs", "0\n")
        .file("proc/sys/net/core/somaxconn", "128\n")
        .file("proc/sys/net/ipv4/tcp_max_syn_backlog", "512\n")
        .file("proc/sys/net/core/rmem_max", "212992\n")
        .file("proc/sys/net/core/wmem_max", "212992\n")
        .file("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n")
        .file("proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t4194304\n")
        .file("proc/sys/net/ipv4/tcp_available_ulp", "espintcp mptcp\n")
        .file("lib/modules/6.8.0-test/kernel/net/tls/tls.ko.zst", "")
        .file("proc/sys/fs/aio-max-nr", "65536\n")
        .file("proc/sys/kernel/io_uring_disabled", "2\n")
        .file(
            "proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units     \n\
             Max open files            1024                 4096                 files     \n\
             Max locked memory         8388608              8388608              bytes     \n",
        )
        .file(
            &format!("{NVME}/queue/scheduler"),
            "[mq-deadline] kyber none\n",
        )
        .file(&format!("{NVME}/queue/nr_requests"), "64\n");
    fake
}

/// A host as the broker wants it.
fn tuned() -> Fake {
    let fake = skeleton();
    for cpu in 0..4 {
        fake.file(
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
            "performance\n",
        );
    }
    for irq in [40, 41, 42, 50] {
        fake.file(&format!("proc/irq/{irq}/smp_affinity_list"), "0\n");
    }
    fake.file(
        "proc/cmdline",
        "root=/dev/sda1 isolcpus=1-3 nohz_full=1-3\n",
    )
    .file(
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "tsc\n",
    )
    .file(
        "sys/devices/system/clocksource/clocksource0/available_clocksource",
        "tsc hpet\n",
    )
    .file(
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always [madvise] never\n",
    )
    .file(
        "sys/kernel/mm/transparent_hugepage/defrag",
        "always defer defer+madvise [madvise] never\n",
    )
    .file("proc/sys/vm/swappiness", "1\n")
    .file("proc/sys/vm/dirty_background_ratio", "5\n")
    .file("proc/sys/vm/dirty_ratio", "60\n")
    .file("proc/sys/vm/dirty_expire_centisecs", "3000\n")
    .file("proc/sys/vm/dirty_writeback_centisecs", "500\n")
    .file("proc/sys/net/core/somaxconn", "4096\n")
    .file("proc/sys/net/ipv4/tcp_max_syn_backlog", "8192\n")
    .file("proc/sys/net/core/rmem_max", "16777216\n")
    .file("proc/sys/net/core/wmem_max", "33554432\n")
    .file("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t16777216\n")
    .file("proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t16777216\n")
    .file(
        "proc/sys/net/ipv4/tcp_available_ulp",
        "espintcp mptcp tls\n",
    )
    .file("proc/sys/fs/aio-max-nr", "1048576\n")
    .file("proc/sys/kernel/io_uring_disabled", "0\n")
    .file(
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n\
             Max open files            1048576              1048576              files     \n\
             Max locked memory         unlimited            unlimited            bytes     \n",
    )
    .file(
        &format!("{NVME}/queue/scheduler"),
        "[none] mq-deadline kyber\n",
    )
    .file(&format!("{NVME}/queue/nr_requests"), "1023\n");
    fake
}

fn only(fake: &Fake, tuner: &str) -> Vec<Finding> {
    check(&fake.ctx(), &[tuner.to_string()]).unwrap()
}

/// (check, current, wanted, severity) of each finding.
fn summary(findings: &[Finding]) -> Vec<(String, String, String, Severity)> {
    findings
        .iter()
        .map(|f| {
            (
                f.check.clone(),
                f.current.clone(),
                f.wanted.clone(),
                f.severity,
            )
        })
        .collect()
}

fn row(
    check: &str,
    current: &str,
    wanted: &str,
    severity: Severity,
) -> (String, String, String, Severity) {
    (
        check.to_string(),
        current.to_string(),
        wanted.to_string(),
        severity,
    )
}

fn writes(findings: &[Finding]) -> Vec<(String, String)> {
    findings
        .iter()
        .flat_map(|f| f.actions.iter())
        .filter_map(|a| match a {
            Action::Write { path, contents } => Some((path.clone(), contents.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn cpu_governor_of_shard_cores() {
    let findings = only(&untuned(), "cpu_governor");
    assert_eq!(
        summary(&findings),
        [row(
            "cpu governor",
            "powersave on cpu 1-3",
            "performance",
            Severity::Warning
        )]
    );
    assert_eq!(writes(&findings).len(), 3);
    let findings = only(&tuned(), "cpu_governor");
    assert_eq!(findings[0].severity, Severity::Ok);
    let findings = only(&skeleton(), "cpu_governor");
    assert_eq!(findings[0].severity, Severity::Unknown);
}

#[test]
fn nic_irqs_kept_off_shard_cores() {
    let findings = only(&untuned(), "irq_affinity");
    assert_eq!(
        summary(&findings),
        [row(
            "eth0 irq affinity",
            "IRQ 40,42,50 on shard cores",
            "cpu 0",
            Severity::Warning
        )]
    );
    assert_eq!(
        writes(&findings),
        [40, 42, 50].map(|irq| (
            format!("/proc/irq/{irq}/smp_affinity_list"),
            "0".to_string()
        ))
    );
    assert_eq!(only(&tuned(), "irq_affinity")[0].severity, Severity::Ok);
    // With every core a shard there is nowhere else to send them.
    let fake = untuned();
    let mut ctx = fake.ctx();
    ctx.shard_cores = None;
    let findings = check(&ctx, &["irq_affinity".to_string()]).unwrap();
    assert_eq!(findings[0].severity, Severity::Ok);
    assert!(findings[0].actions.is_empty());
}

#[test]
fn isolcpus_and_nohz_full_from_the_command_line() {
    let findings = only(&untuned(), "isolcpus");
    assert_eq!(
        summary(&findings),
        [
            row("isolcpus", "1-2", "1-3", Severity::Info),
            row("nohz_full", "unset", "1-3", Severity::Info),
        ]
    );
    assert_eq!(
        findings[0].actions,
        [Action::KernelCmdline {
            add: "isolcpus=1-3".to_string()
        }]
    );
    assert!(only(&tuned(), "isolcpus")
        .iter()
        .all(|f| f.severity == Severity::Ok));
}

#[test]
fn clocksource_tsc() {
    assert_eq!(
        summary(&only(&untuned(), "clocksource")),
        [row("clocksource", "kvm-clock", "tsc", Severity::Warning)]
    );
    assert_eq!(only(&tuned(), "clocksource")[0].severity, Severity::Ok);
    let fake = Fake::empty();
    fake.file(
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "arch_sys_counter\n",
    )
    .file(
        "sys/devices/system/clocksource/clocksource0/available_clocksource",
        "arch_sys_counter\n",
    );
    let findings = only(&fake, "clocksource");
    assert_eq!(
        findings[0].severity,
        Severity::Ok,
        "tsc not offered: nothing to do"
    );
}

#[test]
fn transparent_hugepages() {
    assert_eq!(
        summary(&only(&untuned(), "transparent_hugepages")),
        [
            row("thp enabled", "always", "madvise", Severity::Info),
            row("thp defrag", "always", "madvise", Severity::Warning),
        ]
    );
    assert!(only(&tuned(), "transparent_hugepages")
        .iter()
        .all(|f| f.severity == Severity::Ok));
}

#[test]
fn swappiness_and_writeback() {
    assert_eq!(
        summary(&only(&untuned(), "swappiness")),
        [row("vm.swappiness", "60", "<= 1", Severity::Warning)]
    );
    assert_eq!(
        summary(&only(&untuned(), "writeback")),
        [
            row("vm.dirty_background_ratio", "10", "1..5", Severity::Info),
            row("vm.dirty_ratio", "20", "40..80", Severity::Info),
            row(
                "vm.dirty_expire_centisecs",
                "6000",
                "1..3000",
                Severity::Info
            ),
            row(
                "vm.dirty_writeback_centisecs",
                "0",
                "1..500",
                Severity::Warning
            ),
        ]
    );
    let fake = tuned();
    fake.file("proc/sys/vm/dirty_background_bytes", "268435456\n")
        .file("proc/sys/vm/dirty_background_ratio", "0\n");
    let findings = only(&fake, "writeback");
    assert_eq!(findings[0].current, "set as bytes (268435456)");
    assert!(findings.iter().all(|f| f.severity == Severity::Ok));
}

#[test]
fn backlogs_and_socket_buffers() {
    assert_eq!(
        summary(&only(&untuned(), "listen_backlog")),
        [
            row("net.core.somaxconn", "128", ">= 4096", Severity::Warning),
            row(
                "net.ipv4.tcp_max_syn_backlog",
                "512",
                ">= 4096",
                Severity::Warning
            ),
        ]
    );
    let findings = only(&untuned(), "socket_buffers");
    assert_eq!(
        summary(&findings),
        [
            row("net.core.rmem_max", "212992", ">= 16777216", Severity::Info),
            row("net.core.wmem_max", "212992", ">= 16777216", Severity::Info),
            row(
                "net.ipv4.tcp_rmem",
                "4096 131072 6291456",
                "max >= 16777216",
                Severity::Info
            ),
            row(
                "net.ipv4.tcp_wmem",
                "4096 16384 4194304",
                "max >= 16777216",
                Severity::Info
            ),
        ]
    );
    assert!(only(&tuned(), "socket_buffers")
        .iter()
        .chain(only(&tuned(), "listen_backlog").iter())
        .all(|f| f.severity == Severity::Ok));
}

#[test]
fn ktls_module() {
    let findings = only(&untuned(), "ktls");
    assert_eq!(findings[0].severity, Severity::Info);
    assert_eq!(
        findings[0].current,
        "not loaded (/lib/modules/6.8.0-test/kernel/net/tls/tls.ko.zst present)"
    );
    assert!(findings[0].actions.contains(&Action::Command {
        command: "modprobe tls".to_string()
    }));
    assert_eq!(only(&tuned(), "ktls")[0].current, "loaded");
    let fake = skeleton();
    fake.file("proc/sys/net/ipv4/tcp_available_ulp", "mptcp\n");
    assert_eq!(only(&fake, "ktls")[0].current, "not built (no tls.ko)");
}

#[test]
fn aio_and_io_uring() {
    assert_eq!(
        summary(&only(&untuned(), "aio")),
        [row("fs.aio-max-nr", "65536", ">= 1048576", Severity::Info)]
    );
    assert_eq!(
        summary(&only(&untuned(), "io_uring")),
        [row("kernel.io_uring_disabled", "2", "0", Severity::Error)]
    );
    let fake = tuned();
    fake.file("proc/sys/kernel/io_uring_disabled", "1\n");
    assert_eq!(only(&fake, "io_uring")[0].severity, Severity::Warning);
    fs::remove_file(fake.path().join("proc/sys/kernel/io_uring_disabled")).unwrap();
    assert_eq!(only(&fake, "io_uring")[0].severity, Severity::Ok);
}

#[test]
fn rlimits_from_proc_self_limits() {
    assert_eq!(
        summary(&only(&untuned(), "rlimits")),
        [
            row(
                "RLIMIT_MEMLOCK",
                "8388608",
                "unlimited (>= 192 MiB)",
                Severity::Warning
            ),
            row(
                "RLIMIT_NOFILE",
                "soft 1024, hard 4096",
                "hard >= 100000",
                Severity::Warning
            ),
        ]
    );
    assert!(only(&tuned(), "rlimits")
        .iter()
        .all(|f| f.severity == Severity::Ok));
}

#[test]
fn data_disk_scheduler_and_queue_depth() {
    let findings = only(&untuned(), "disk");
    assert_eq!(
        summary(&findings),
        [
            row(
                "nvme0n1 scheduler",
                "mq-deadline",
                "none",
                Severity::Warning
            ),
            row("nvme0n1 nr_requests", "64", ">= 256", Severity::Info),
        ]
    );
    assert_eq!(
        writes(&findings),
        [
            (format!("/{NVME}/queue/scheduler"), "none".to_string()),
            (format!("/{NVME}/queue/nr_requests"), "256".to_string()),
        ]
    );
    assert!(only(&tuned(), "disk")
        .iter()
        .all(|f| f.severity == Severity::Ok));
    // A spinning disk wants mq-deadline.
    let fake = tuned();
    fake.file(&format!("{NVME}/queue/rotational"), "1\n");
    assert_eq!(
        summary(&only(&fake, "disk"))[0],
        row(
            "nvme0n1 scheduler",
            "none",
            "mq-deadline",
            Severity::Warning
        )
    );
    // A data directory on a filesystem without a block device.
    let fake = tuned();
    fake.file(
        "proc/self/mountinfo",
        "1 0 0:30 / / rw - overlay overlay rw\n",
    );
    let findings = only(&fake, "disk");
    assert_eq!(findings[0].severity, Severity::Unknown);
    assert!(findings[0].current.contains("overlay"));
}

#[test]
fn a_tuned_host_passes_every_check() {
    let findings = check(&tuned().ctx(), &[]).unwrap();
    let short: Vec<_> = findings
        .iter()
        .filter(|f| f.severity != Severity::Ok)
        .collect();
    assert!(short.is_empty(), "{short:#?}");
    assert!(findings.len() >= 25);
}

#[test]
fn an_empty_tree_reports_unknowns_without_failing() {
    let fake = Fake::empty();
    let findings = check(&fake.ctx(), &[]).unwrap();
    assert!(findings.iter().all(|f| f.actions.is_empty()));
    assert!(findings.iter().any(|f| f.severity == Severity::Unknown));
    let before = fake.snapshot();
    let (code, _) = fake.run(&["apply", "--yes"]);
    assert_eq!(code, 0);
    assert_eq!(fake.snapshot(), before);
}

#[test]
fn check_prints_a_table_and_json() {
    let fake = untuned();
    let before = fake.snapshot();
    let (code, table) = fake.run(&["check"]);
    assert_eq!(code, 0);
    assert!(table.starts_with("CHECK"));
    assert!(table.contains("vm.swappiness"));
    let (_, json) = fake.run(&["check", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let swappiness = value
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "vm.swappiness")
        .unwrap();
    assert_eq!(swappiness["current"], "60");
    assert_eq!(swappiness["severity"], "warning");
    assert_eq!(swappiness["actions"][0]["path"], "/proc/sys/vm/swappiness");
    assert_eq!(fake.snapshot(), before, "check writes nothing");
}

#[test]
fn dry_run_writes_nothing() {
    let fake = untuned();
    let before = fake.snapshot();
    let (code, out) = fake.run(&["apply"]);
    assert_eq!(code, 0);
    assert_eq!(fake.snapshot(), before);
    assert!(out.contains("would write \"1\" to /proc/sys/vm/swappiness"));
    assert!(out.contains("add `isolcpus=1-3` to the kernel command line"));
    assert!(out.contains("dry run: nothing written"));
}

#[test]
fn apply_yes_writes_exactly_the_expected_files() {
    let fake = untuned();
    let mut expected = fake.snapshot();
    let (code, out) = fake.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}");
    let nvme_queue = format!("{NVME}/queue");
    let mut changes: Vec<(String, &str)> = vec![
        (
            "sys/devices/system/clocksource/clocksource0/current_clocksource".into(),
            "tsc",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/enabled".into(),
            "madvise",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/defrag".into(),
            "madvise",
        ),
        ("proc/sys/vm/swappiness".into(), "1"),
        ("proc/sys/vm/dirty_background_ratio".into(), "5"),
        ("proc/sys/vm/dirty_ratio".into(), "60"),
        ("proc/sys/vm/dirty_expire_centisecs".into(), "3000"),
        ("proc/sys/vm/dirty_writeback_centisecs".into(), "500"),
        ("proc/sys/net/core/somaxconn".into(), "4096"),
        ("proc/sys/net/ipv4/tcp_max_syn_backlog".into(), "4096"),
        ("proc/sys/net/core/rmem_max".into(), "16777216"),
        ("proc/sys/net/core/wmem_max".into(), "16777216"),
        ("proc/sys/net/ipv4/tcp_rmem".into(), "4096 131072 16777216"),
        ("proc/sys/net/ipv4/tcp_wmem".into(), "4096 16384 16777216"),
        ("etc/modules-load.d/tls.conf".into(), "tls\n"),
        ("proc/sys/fs/aio-max-nr".into(), "1048576"),
        ("proc/sys/kernel/io_uring_disabled".into(), "0"),
        (format!("{nvme_queue}/scheduler"), "none"),
        (format!("{nvme_queue}/nr_requests"), "256"),
        ("proc/irq/40/smp_affinity_list".into(), "0"),
        ("proc/irq/42/smp_affinity_list".into(), "0"),
        ("proc/irq/50/smp_affinity_list".into(), "0"),
    ];
    for cpu in 1..=3 {
        changes.push((
            format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
            "performance",
        ));
    }
    for (path, contents) in &changes {
        expected.insert(path.clone(), contents.to_string());
    }
    expected.insert("etc/".into(), String::new());
    expected.insert("etc/modules-load.d/".into(), String::new());
    assert_eq!(fake.snapshot(), expected);
    assert_eq!(out.matches("  wrote ").count(), changes.len());
    // What apply cannot do is still short afterwards, and only that.
    let left: Vec<String> = check(&fake.ctx(), &[])
        .unwrap()
        .into_iter()
        .filter(|f| f.severity.falls_short())
        .map(|f| f.check)
        .collect();
    assert_eq!(
        left,
        [
            "isolcpus",
            "nohz_full",
            "ktls (tls ulp)",
            "RLIMIT_MEMLOCK",
            "RLIMIT_NOFILE"
        ]
    );
}

#[test]
fn script_holds_the_commands_and_writes_nothing() {
    let fake = untuned();
    let before = fake.snapshot();
    let (code, script) = fake.run(&["apply", "--script"]);
    assert_eq!(code, 0);
    assert_eq!(fake.snapshot(), before);
    assert!(script.starts_with("#!/bin/sh\n"));
    for line in [
        "sysctl -w 'vm.swappiness=1'",
        "sysctl -w 'net.core.somaxconn=4096'",
        "sysctl -w 'net.ipv4.tcp_wmem=4096 16384 16777216'",
        "sysctl -w 'kernel.io_uring_disabled=0'",
        "printf '%s\\n' 'performance' > '/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor'",
        "printf '%s\\n' 'tsc' > '/sys/devices/system/clocksource/clocksource0/current_clocksource'",
        "printf '%s\\n' '0' > '/proc/irq/40/smp_affinity_list'",
        "printf '%s\\n' 'tls' > '/etc/modules-load.d/tls.conf'",
        "modprobe tls",
        "# add to the kernel command line, then reboot: isolcpus=1-3",
        "# by hand: LimitMEMLOCK=infinity",
    ] {
        assert!(
            script.lines().any(|l| l.starts_with(line)),
            "missing {line:?} in\n{script}"
        );
    }
    assert!(script.contains(&format!("> '/{NVME}/queue/scheduler'")));
}

#[test]
fn unknown_tuner_names_are_refused() {
    let error = check(&untuned().ctx(), &["nope".to_string()]).unwrap_err();
    assert!(error.to_string().contains("unknown tuner \"nope\""));
}
