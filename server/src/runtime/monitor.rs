//! MONITOR: every command the server runs, as a line sent to each MONITOR client
//! (`+1700000000.123456 [0 127.0.0.1:50000] "set" "k" "v"`), from whichever worker ran
//! it. A worker gathers its lines of one loop iteration and sends them, once, to each
//! worker that has MONITOR clients. Costs one atomic load per command while no client
//! monitors.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::runtime::msg::ConnRef;

/// The MONITOR clients.
#[derive(Debug, Default)]
pub struct Monitors {
    clients: Mutex<Vec<ConnRef>>,
    count: AtomicUsize,
}

impl Monitors {
    /// Whether any client monitors.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// A client starts monitoring.
    pub fn add(&self, client: ConnRef) {
        let mut clients = self.lock();
        clients.push(client);
        self.count.store(clients.len(), Ordering::Relaxed);
    }

    /// A client stops (RESET, or it closed).
    pub fn remove(&self, client: ConnRef) {
        let mut clients = self.lock();
        clients.retain(|c| *c != client);
        self.count.store(clients.len(), Ordering::Relaxed);
    }

    /// The clients monitoring now.
    pub fn clients(&self) -> Vec<ConnRef> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ConnRef>> {
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Appends the MONITOR line of a command to `out`: the time, the database and the
/// client's address, then each argument quoted as redis-server quotes it (arguments
/// that carry secrets, as `(redacted)`).
pub fn line(out: &mut Vec<u8>, db: usize, addr: &str, args: &[&[u8]]) {
    let micros = crate::clock::now_us();
    let mut text = format!(
        "+{}.{:06} [{db} {addr}]",
        micros / 1_000_000,
        micros % 1_000_000
    );
    let redacted = redacted_args(args);
    for (i, arg) in args.iter().enumerate() {
        text.push(' ');
        if redacted.contains(&i) {
            text.push_str("\"(redacted)\"");
        } else {
            crate::util::repr_into(&mut text, arg);
        }
    }
    text.push_str("\r\n");
    out.extend_from_slice(text.as_bytes());
}

/// Whether MONITOR shows `spec`'s runs: not administrative commands, nor those flagged
/// `skip_monitor` (EVAL shows the commands its script calls, not itself).
pub fn shown(spec: &crate::table::CommandSpec) -> bool {
    use crate::table::Flags;
    !spec.flags.intersects(Flags::ADMIN) && !spec.flags.intersects(Flags::SKIP_MONITOR)
}

thread_local! {
    /// The lines of commands that plans running on this thread's worker route (a
    /// script's calls under its plan), until the worker sends its iteration's lines.
    static PLAN_LINES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`line`] for a command a plan routes: kept until the worker takes it
/// ([`take_plan_lines`]).
pub fn plan_line(db: usize, addr: &str, args: &[&[u8]]) {
    PLAN_LINES.with_borrow_mut(|out| line(out, db, addr, args));
}

/// Moves the lines plans made on this thread to the end of `feed`.
pub fn take_plan_lines(feed: &mut Vec<u8>) {
    PLAN_LINES.with_borrow_mut(|lines| feed.append(lines));
}

/// The positions of arguments redis-server hides from MONITOR: AUTH's, and the
/// username and password of HELLO's AUTH option.
fn redacted_args(args: &[&[u8]]) -> Vec<usize> {
    let Some(name) = args.first() else {
        return Vec::new();
    };
    if name.eq_ignore_ascii_case(b"auth") {
        return (1..args.len()).collect();
    }
    if name.eq_ignore_ascii_case(b"hello") {
        let mut hidden = Vec::new();
        let mut i = 2;
        while i < args.len() {
            if args[i].eq_ignore_ascii_case(b"auth") && i + 2 < args.len() {
                hidden.extend([i + 1, i + 2]);
                i += 3;
            } else if args[i].eq_ignore_ascii_case(b"setname") {
                i += 2;
            } else {
                i += 1;
            }
        }
        return hidden;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_arguments_and_hide_secrets() {
        let mut out = Vec::new();
        line(
            &mut out,
            3,
            "127.0.0.1:5000",
            &[b"set", b"k\n", b"a \"b\"\x01"],
        );
        let text = String::from_utf8(out).unwrap_or_default();
        let (time, rest) = text.split_once(' ').unwrap_or_default();
        assert!(time.starts_with('+') && time.contains('.'), "{text}");
        assert_eq!(
            rest,
            "[3 127.0.0.1:5000] \"set\" \"k\\n\" \"a \\\"b\\\"\\x01\"\r\n"
        );
        let mut out = Vec::new();
        line(&mut out, 0, "a", &[b"HELLO", b"3", b"AUTH", b"u", b"p"]);
        let text = String::from_utf8(out).unwrap_or_default();
        assert!(text.ends_with("\"HELLO\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
        let mut out = Vec::new();
        line(&mut out, 0, "a", &[b"auth", b"pw"]);
        assert!(String::from_utf8_lossy(&out).ends_with("\"auth\" \"(redacted)\"\r\n"));
    }
}
