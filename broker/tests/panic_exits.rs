//! A panic in any broker thread (a shard's among them) is logged through the broker's
//! logging and ends the process with a failure status, instead of leaving the other shards
//! waiting on a dead one. The panicking process is this test binary run again as a child
//! (the hook aborts, which no test could survive in-process).

use std::process::Command;

use broker::logging::{init_broker, LogFormat, LoggerLevels};

/// Set in the child's environment: be the process that panics.
const CHILD_ENV: &str = "BROKER_PANIC_EXITS_CHILD";

#[test]
fn a_panicking_shard_thread_is_logged_and_ends_the_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        init_broker(LogFormat::Json, LoggerLevels::default()).unwrap();
        let shard = std::thread::Builder::new()
            .name("shard-1".into())
            .spawn(|| panic!("shard gave up: {}", 42))
            .unwrap();
        // Without the hook's abort the thread unwinds, the join reports it and the process
        // carries on (a broker's other shards would wait on it for ever).
        let _ = shard.join();
        println!("the process survived its shard");
        return;
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panicking_shard_thread_is_logged_and_ends_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        !child.status.success(),
        "the process went on after a panic: {:?}\nstdout: {stdout}\nstderr: {stderr}",
        child.status
    );
    assert!(!stdout.contains("survived"), "stdout: {stdout}");
    // One JSON event of the broker's logging, with the message, where and which thread.
    let event = stderr
        .lines()
        .find(|line| line.contains("panicked: shard gave up: 42"))
        .unwrap_or_else(|| panic!("no panic event in stderr: {stderr}"));
    assert!(event.starts_with('{'), "not the broker's JSON log: {event}");
    assert!(event.contains("\"level\":\"ERROR\""), "{event}");
    assert!(event.contains("\"thread\":\"shard-1\""), "{event}");
    assert!(event.contains("panic_exits.rs:"), "{event}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            child.status.signal(),
            Some(libc::SIGABRT),
            "{:?}",
            child.status
        );
    }
}
