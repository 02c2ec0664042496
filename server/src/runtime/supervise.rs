//! `supervised systemd`: the service manager is told how start-up and shutdown go, as
//! redis-server tells it through libsystemd's `sd_notify` — a unit of `Type=notify`
//! (Debian's redis-server.service) waits for `READY=1` before it counts the service as
//! started, and kills one that never sends it. The messages are datagrams to the socket
//! `$NOTIFY_SOCKET` names (a leading `@`: the abstract namespace).

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::OnceLock;

/// Where messages go, once start-up found the server supervised.
static NOTIFY: OnceLock<SocketAddr> = OnceLock::new();

/// Whether `supervised` (its value `mode`) and the environment make a service manager
/// expect news from the server: then it does not daemonize (`daemonize yes` ignored, as
/// by redis-server).
pub fn expected(mode: &str) -> bool {
    matches!(mode, "systemd" | "auto") && std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Start-up: whether `supervised` (`no`, `systemd`, `auto`, `upstart`) and the
/// environment make the server supervised by systemd; if so, tells it the server is
/// loading and remembers where to send what follows. Logged as redis-server logs it.
pub fn start(mode: &str) {
    let socket = std::env::var_os("NOTIFY_SOCKET");
    let systemd = match mode {
        "systemd" => true,
        "auto" => {
            if std::env::var_os("UPSTART_JOB").is_some() {
                crate::log!(
                    Warning,
                    "upstart supervision detected, but Goblin does not support upstart"
                );
                return;
            }
            socket.is_some()
        }
        "upstart" => {
            crate::log!(
                Warning,
                "upstart supervision requested, but Goblin does not support upstart"
            );
            return;
        }
        _ => false,
    };
    if !systemd {
        return;
    }
    let Some(addr) = socket
        .as_deref()
        .and_then(|s| address(s.as_encoded_bytes()))
    else {
        crate::log!(
            Warning,
            "systemd supervision error: NOTIFY_SOCKET not found!"
        );
        return;
    };
    if let Err(e) = send(&addr, "STATUS=Redis is loading...\n") {
        crate::log!(Warning, "systemd supervision error: sd_notify: {e}");
        return;
    }
    let _ = NOTIFY.set(addr);
    crate::log!(
        Notice,
        "Supervised by systemd. Please make sure you set appropriate values for \
         TimeoutStartSec and TimeoutStopSec in your service unit."
    );
}

/// Whether start-up found the server supervised (INFO's `process_supervised`).
pub fn supervised() -> &'static str {
    if NOTIFY.get().is_some() {
        "systemd"
    } else {
        "no"
    }
}

/// Tells the service manager `message` (`READY=1\n` …), when supervised.
pub fn notify(message: &str) {
    if let Some(addr) = NOTIFY.get()
        && let Err(e) = send(addr, message)
    {
        crate::log!(Warning, "systemd supervision error: sd_notify: {e}");
    }
}

/// The server is ready: loading is over (or there was nothing to load).
pub fn ready() {
    notify("STATUS=Ready to accept connections\n");
    notify("READY=1\n");
}

/// `$NOTIFY_SOCKET`'s address: a path, or an abstract name after `@`.
fn address(socket: &[u8]) -> Option<SocketAddr> {
    match socket {
        [] => None,
        [b'@', name @ ..] => {
            use std::os::linux::net::SocketAddrExt as _;
            SocketAddr::from_abstract_name(name).ok()
        }
        [b'/', ..] => {
            use std::os::unix::ffi::OsStrExt as _;
            SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(socket)).ok()
        }
        // (sd_notify takes only these two forms, and `vsock:` ones Goblin does not.)
        _ => None,
    }
}

fn send(addr: &SocketAddr, message: &str) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(message.as_bytes(), addr).map(|_| ())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_a_path_or_an_abstract_name() {
        use std::os::linux::net::SocketAddrExt as _;
        let path = address(b"/run/systemd/notify").unwrap();
        assert_eq!(
            path.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let abstract_name = address(b"@goblin/notify").unwrap();
        assert_eq!(
            abstract_name.as_abstract_name(),
            Some(&b"goblin/notify"[..])
        );
        assert!(address(b"").is_none());
        assert!(address(b"relative").is_none());
    }

    #[test]
    fn messages_reach_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("goblin-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        send(
            &address(format!("@{name}").as_bytes()).unwrap(),
            "READY=1\n",
        )
        .unwrap();
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}
