//! The crash report: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT (a Rust panic aborts
//! the release build), the log gets redis-server's bug report — `Redis <version>
//! crashed by signal: <n>, si_code: <c>`, who sent it or what was accessed, the stack
//! trace — and the process dies of the signal, as redis-server's `sigsegvHandler`
//! (`crash-log-enabled no` at start: no report). DEBUG SEGFAULT and DEBUG PANIC crash on
//! purpose.
//!
//! Its `unsafe` is what a signal handler needs of libc (each block's comment says why
//! it is sound); exercised by `diagnostics::crash_reports_are_logged_as_redis_does`.
#![allow(unsafe_code)]

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use nix::libc;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// Where the report goes: the log's file descriptor (standard output until a log file
/// is set).
static LOG_FD: AtomicI32 = AtomicI32::new(libc::STDOUT_FILENO);
/// A report is being written: a second crash while writing it dies at once.
static REPORTING: AtomicBool = AtomicBool::new(false);

const SIGNALS: [Signal; 5] = [
    Signal::SIGSEGV,
    Signal::SIGBUS,
    Signal::SIGFPE,
    Signal::SIGILL,
    Signal::SIGABRT,
];

/// The log writes to `fd` from now on (`log::set_file`).
pub fn set_log_fd(fd: i32) {
    LOG_FD.store(fd, Ordering::Relaxed);
}

/// Installs the handler of the crash signals.
pub fn install() {
    let action = SigAction::new(
        SigHandler::SigAction(crashed),
        // Reset to the default on entry (the signal raised again kills), and not
        // blocked inside (a fault in the handler is not held back).
        SaFlags::SA_SIGINFO | SaFlags::SA_RESETHAND | SaFlags::SA_NODEFER,
        SigSet::empty(),
    );
    for sig in SIGNALS {
        // SAFETY: `crashed` is a plain `extern "C"` function that stays valid for the
        // process's life. Before anything else it writes with write(2) from a stack
        // buffer (its text formatted without allocating) and reads atomics only; the
        // stack trace that follows allocates, which is not async-signal-safe, so an
        // alarm is set first: should the allocator's lock be held by the crashed
        // thread, SIGALRM's default action ends the process within seconds. The old
        // action is not kept (the process ends after the report). Exercised by
        // `diagnostics::crash_reports_are_logged_as_redis_does` (e2e: SIGABRT, DEBUG
        // SEGFAULT, DEBUG PANIC).
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
}

/// DEBUG SEGFAULT: SIGSEGV, as the invalid write of redis-server's.
pub fn segfault() -> ! {
    let _ = signal::raise(Signal::SIGSEGV);
    std::process::abort()
}

/// DEBUG PANIC (`serverPanic`): the bug report with the Guru Meditation lines (naming
/// where it was called) in place of the signal's, then death by SIGABRT.
#[track_caller]
pub fn panic(reason: &str) -> ! {
    let at = std::panic::Location::caller();
    REPORTING.store(true, Ordering::SeqCst);
    raw(START);
    for line in [
        "------------------------------------------------",
        "!!! Software Failure. Press left mouse button to continue",
    ] {
        crate::log!(Warning, "{line}");
    }
    crate::log!(
        Warning,
        "Guru Meditation: {reason} #{}:{}",
        at.file(),
        at.line()
    );
    stack_trace_and_end();
    die(libc::SIGABRT)
}

const START: &str = "\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===\n";

/// A line of the report in a stack buffer (longer text is cut).
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            buf: [0; 256],
            len: 0,
        }
    }

    /// Starts a log line as `log::line` does: `pid:M date # `.
    fn logged() -> Line {
        let mut line = Line::new();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let _ = write!(line, "{}:{} ", std::process::id(), crate::log::role());
        let _ = crate::log::write_timestamp(&mut line, now.as_millis() as u64);
        let _ = line.write_str(" # ");
        line
    }

    fn out(&self) {
        write_all(&self.buf[..self.len]);
    }
}

/// Writes `bytes` to the log with write(2) (async-signal-safe), as much as it takes.
fn write_all(bytes: &[u8]) {
    let fd = LOG_FD.load(Ordering::Relaxed);
    let mut at = 0;
    while at < bytes.len() {
        // SAFETY: write(2) of initialized bytes of a live slice, within its length.
        let n = unsafe { libc::write(fd, bytes[at..].as_ptr().cast(), bytes.len() - at) };
        if n <= 0 {
            return;
        }
        at += n as usize;
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes `text` as it is.
fn raw(text: &str) {
    let mut line = Line::new();
    let _ = line.write_str(text);
    line.out();
}

extern "C" fn crashed(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    if REPORTING.swap(true, Ordering::SeqCst) {
        die(sig);
    }
    raw(START);
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid `siginfo_t` (checked for
    // null all the same).
    let info = unsafe { info.as_ref() };
    let code = info.map_or(0, |i| i.si_code);
    let mut line = Line::logged();
    let _ = writeln!(
        line,
        "Redis {} crashed by signal: {sig}, si_code: {code}",
        crate::runtime::server::REDIS_VERSION
    );
    line.out();
    if let Some(info) = info {
        let mut line = Line::logged();
        if code == libc::SI_USER || code == libc::SI_TKILL {
            // SAFETY: for a signal sent by kill(2) or tgkill(2) the kernel fills the
            // sender's pid and uid.
            let (pid, uid) = unsafe { (info.si_pid(), info.si_uid()) };
            let _ = writeln!(line, "Killed by PID: {pid}, UID: {uid}");
        } else if matches!(sig, libc::SIGSEGV | libc::SIGBUS) {
            // SAFETY: for a fault the kernel fills the accessed address.
            let addr = unsafe { info.si_addr() };
            let _ = writeln!(line, "Accessing address: {addr:p}");
        } else {
            let _ = writeln!(line, "Crashed");
        }
        line.out();
    }
    stack_trace_and_end();
    die(sig)
}

/// The report's stack trace and its END line.
fn stack_trace_and_end() {
    raw("\n------ STACK TRACE ------\n");
    // alarm(2) is async-signal-safe; its SIGALRM (default action: terminate) ends a
    // process whose stack trace hangs on a lock the crashed thread held.
    nix::unistd::alarm::set(5);
    write_all(
        std::backtrace::Backtrace::force_capture()
            .to_string()
            .as_bytes(),
    );
    raw(
        "\n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n\n       \
         Please report the crash, with this report, to Goblin's maintainers.\n\n",
    );
}

/// Dies of `sig`: its default action (the handler reset itself on entry), raised again.
fn die(sig: libc::c_int) -> ! {
    if let Ok(signal) = Signal::try_from(sig) {
        // SAFETY: restoring the default action is always sound.
        let _ = unsafe { signal::signal(signal, SigHandler::SigDfl) };
        let _ = signal::raise(signal);
    }
    std::process::abort()
}
