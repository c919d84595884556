//! SIGUSR1 / SIGUSR2 change the log levels: SIGUSR1 makes every logger one step more verbose
//! (INFO -> DEBUG -> TRACE), SIGUSR2 one step less (down to ERROR, never OFF). A thread of its
//! own waits for them with sigwait(2); the shards never see them (the signals are blocked in
//! every thread, which inherit the mask of the thread that starts them).

use std::io;

/// Blocks SIGUSR1 and SIGUSR2 in this thread (and so in every thread started after) and
/// starts the thread that takes them.
pub fn spawn() -> io::Result<()> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it, and
    // pthread_sigmask changes only this thread's mask.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        set
    };
    std::thread::Builder::new()
        .name("log-signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` is an initialised sigset_t; sigwait writes the signal taken.
            let rc = unsafe { libc::sigwait(&set, &mut signal) };
            if rc != 0 {
                let error = io::Error::from_raw_os_error(rc);
                tracing::error!(%error, "sigwait failed; SIGUSR1/SIGUSR2 no longer change log levels");
                return;
            }
            match signal {
                libc::SIGUSR1 => super::control().step(true, "SIGUSR1"),
                libc::SIGUSR2 => super::control().step(false, "SIGUSR2"),
                _ => {}
            }
        })?;
    Ok(())
}
