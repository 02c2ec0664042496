//! `daemonize yes`: the process goes to the background as redis-server's does — it
//! forks, the parent exits 0 at once, the child leads a session of its own with its
//! standard input, output and error on /dev/null, and writes its pid to `pidfile`
//! (`/var/run/redis.pid` when none is set). Not when a service manager supervises it
//! (`supervised`), which expects the process it started to stay.

use std::io;

/// redis-server's `pidfile` when it daemonizes without one.
pub const DEFAULT_PIDFILE: &str = "/var/run/redis.pid";

/// The threads this process runs, as the kernel counts them.
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Goes to the background. Returns in the child; the parent exits 0.
///
/// # Errors
/// When the process runs more than one thread (a fork would then be unsound: see
/// below), or `fork` fails; the caller goes on in the foreground.
#[allow(unsafe_code)]
pub fn daemonize() -> io::Result<()> {
    use nix::unistd::{ForkResult, dup2_stderr, dup2_stdin, dup2_stdout, fork, setsid};
    if threads() != Some(1) {
        return Err(io::Error::other(
            "the process runs several threads already; not forking",
        ));
    }
    // SAFETY: `fork` is unsound only where another thread could hold a lock (the
    // allocator's, stdout's) or be midway through changing shared state, which the child
    // would inherit frozen in that state. The kernel has just counted one thread in this
    // process (the caller's): nothing else runs, so the child starts from a consistent
    // copy and may run any code, as the parent could. (The binary calls this first
    // thing, before any thread is spawned; a library caller with threads is refused
    // above.) Exercised by e2e `daemonize::*`.
    match unsafe { fork() }.map_err(io::Error::from)? {
        ForkResult::Parent { .. } => std::process::exit(0),
        ForkResult::Child => {}
    }
    let _ = setsid();
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = dup2_stdin(&null);
        let _ = dup2_stdout(&null);
        let _ = dup2_stderr(&null);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kernel_counts_this_process_threads() {
        // (The test harness runs tests on threads of its own: more than one, or one.)
        assert!(super::threads().is_some_and(|n| n >= 1));
    }
}
