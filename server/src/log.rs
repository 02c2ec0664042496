//! The server's log: redis-server's line format and levels (`loglevel`, `logfile`).
//!
//! ```text
//! 4242:M 01 Dec 2026 19:57:38.123 * DB saved on disk
//! ```
//!
//! pid, role (`M`, or `S` while the server is a replica), the time (UTC; redis-server
//! writes local time), the level's mark (`.` debug, `-` verbose, `*` notice, `#` warning)
//! and the message. `loglevel` filters (`notice` by default); `logfile` names a file to
//! append to, `""` (the default) means standard output, as with redis-server (beside
//! Goblin's one `ready on` line there, which scripts read for the port).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// A message's level, as `loglevel` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Much, useful for development.
    Debug,
    /// Rarely useful, not as noisy as debug.
    Verbose,
    /// Moderately verbose, what you want in production (the default).
    Notice,
    /// Only very important messages.
    Warning,
}

impl Level {
    /// The level named `name` (any case), or redis-server's error.
    ///
    /// # Errors
    /// The names it accepts.
    pub fn parse(name: &str) -> Result<Level, String> {
        match name.to_ascii_lowercase().as_str() {
            "debug" => Ok(Level::Debug),
            "verbose" => Ok(Level::Verbose),
            "notice" => Ok(Level::Notice),
            "warning" => Ok(Level::Warning),
            _ => Err(
                "argument(s) must be one of the following: debug, verbose, notice, warning".into(),
            ),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Verbose => "verbose",
            Level::Notice => "notice",
            Level::Warning => "warning",
        }
    }

    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static ROLE: AtomicU8 = AtomicU8::new(b'M');
static FILE: Mutex<Option<File>> = Mutex::new(None);

/// The role the lines name from now on: `S` for a replica, `M` for a master.
pub fn set_replica(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}

/// Logs at `level` and above from now on (CONFIG SET loglevel).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Writes to `path` (appending) from now on, or to standard output when `None`.
///
/// # Errors
/// When the file cannot be opened (the log stays where it was).
pub fn set_file(path: Option<&Path>) -> std::io::Result<()> {
    let file = match path {
        Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
        None => None,
    };
    if let Ok(mut slot) = FILE.lock() {
        use std::os::fd::AsRawFd;
        crate::crash::set_log_fd(file.as_ref().map_or(1, AsRawFd::as_raw_fd));
        *slot = file;
    }
    Ok(())
}

/// The role the lines name: `M` or `S`.
pub fn role() -> char {
    char::from(ROLE.load(Ordering::Relaxed))
}

/// Whether a message at `level` would be written.
pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Writes one line (see [`crate::log!`]).
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    append(line(level, args).as_bytes());
}

/// A log line as redis-server writes one: `pid:M date level-mark text`.
fn line(level: Level, args: impl std::fmt::Display) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}:{} {} {} {args}\n",
        std::process::id(),
        role(),
        timestamp(now.as_millis() as u64),
        level.mark()
    )
}

/// Logs each line of `text` as a warning and exits with status 1, holding the log from
/// the first line to the exit: no other thread's line comes after them, so the reason
/// stays the log's last line (what redis-server's tests read with `tail -1`).
pub fn fatal(text: &str) -> ! {
    let mut slot = FILE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for text in text.lines() {
        let line = line(Level::Warning, text);
        let _ = match slot.as_mut() {
            Some(file) => file.write_all(line.as_bytes()),
            None => std::io::stdout().lock().write_all(line.as_bytes()),
        };
    }
    std::process::exit(1)
}

/// Writes `text` as it is, without the line's prefix, when `level` is logged (the logo).
pub fn write_raw(level: Level, text: &str) {
    if enabled(level) {
        append(text.as_bytes());
    }
}

/// Whether the log goes to standard output (`logfile ""`).
pub fn to_stdout() -> bool {
    FILE.lock().map(|slot| slot.is_none()).unwrap_or(false)
}

fn append(bytes: &[u8]) {
    let mut slot = FILE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // A closed or full destination loses the line, never the server.
    let _ = match slot.as_mut() {
        Some(file) => file.write_all(bytes),
        None => std::io::stdout().lock().write_all(bytes),
    };
}

/// `01 Dec 2026 19:57:38.123` (UTC) for Unix milliseconds `ms`.
fn timestamp(ms: u64) -> String {
    let mut out = String::new();
    let _ = write_timestamp(&mut out, ms);
    out
}

/// Writes [`timestamp`]'s text to `out`, allocating nothing (the crash report's lines).
pub(crate) fn write_timestamp(out: &mut impl std::fmt::Write, ms: u64) -> std::fmt::Result {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms / 1000;
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    write!(
        out,
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        ms % 1000
    )
}

/// Logs a line at a level: `log!(Notice, "DB saved on disk")`.
#[macro_export]
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::write($crate::log::Level::$level, format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_redis_writes_them() {
        assert_eq!(timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(timestamp(1_796_155_058_123), "01 Dec 2026 19:57:38.123");
        assert_eq!(timestamp(951_782_400_000), "29 Feb 2000 00:00:00.000");
    }

    #[test]
    fn levels_by_name() {
        for level in [Level::Debug, Level::Verbose, Level::Notice, Level::Warning] {
            assert_eq!(Level::parse(level.name()), Ok(level));
        }
        assert!(Level::parse("loud").is_err());
        assert!(Level::Warning > Level::Notice);
    }
}
