//! The sockets clients come through: TCP, on each `bind` address, and the Unix socket
//! `unixsocket` names. A listener hands out streams of its own kind; the rest of the
//! server reads and writes them alike (by descriptor) and tells them apart only where
//! Redis does: a client's address, and protected mode.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use mio::event::Source;
use mio::{Interest, Registry, Token};

/// A client's connection.
#[derive(Debug)]
pub enum Stream {
    /// Over TCP.
    Tcp(mio::net::TcpStream),
    /// Through the Unix socket.
    Unix(mio::net::UnixStream),
}

/// Where a client is connected from, as CLIENT LIST shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Over TCP: the peer's address, and the server's end of it.
    Tcp {
        /// The client's address.
        peer: SocketAddr,
        /// The server's address the client connected to.
        local: Option<SocketAddr>,
    },
    /// Through the Unix socket at this path.
    Unix(Arc<str>),
    /// No connection: a script's or a test's client.
    None,
}

impl Origin {
    /// The peer's IP address (a replica's, in INFO): empty off TCP.
    pub fn ip(&self) -> String {
        match self {
            Origin::Tcp { peer, .. } => peer.ip().to_string(),
            _ => String::new(),
        }
    }

    /// CLIENT LIST's `addr=`: `ip:port`, or `path:0` for the Unix socket (as Redis).
    pub fn addr(&self) -> String {
        match self {
            Origin::Tcp { peer, .. } => peer.to_string(),
            Origin::Unix(path) => format!("{path}:0"),
            Origin::None => String::new(),
        }
    }

    /// CLIENT LIST's `laddr=`: the server's end, `path:0` for the Unix socket.
    pub fn laddr(&self) -> String {
        match self {
            Origin::Tcp { local, .. } => local.map(|a| a.to_string()).unwrap_or_default(),
            Origin::Unix(path) => format!("{path}:0"),
            Origin::None => String::new(),
        }
    }

    /// The address a MONITOR line shows: `ip:port`, or `unix:path` (as Redis).
    pub fn monitor_addr(&self) -> String {
        match self {
            Origin::Unix(path) => format!("unix:{path}"),
            other => other.addr(),
        }
    }

    /// Whether the client is on this machine's loopback interface or the Unix socket:
    /// redis-server's `islocalClient`, for protected mode and the `local` settings.
    pub fn is_local(&self) -> bool {
        match self {
            Origin::Tcp { peer, .. } => is_loopback(peer.ip()),
            Origin::Unix(_) => true,
            Origin::None => false,
        }
    }

    /// Through the Unix socket (CLIENT LIST's `U` flag).
    pub fn is_unix(&self) -> bool {
        matches!(self, Origin::Unix(_))
    }
}

/// Whether `ip` is a loopback address, an IPv4 one mapped into IPv6 included.
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        v4 => v4.is_loopback(),
    }
}

impl Stream {
    /// Sets the socket up as redis-server sets a client's: replies go out as soon as
    /// they are written, and TCP peers are probed after `keepalive` idle seconds (0:
    /// never).
    pub fn set_up(&self, keepalive: u64) {
        let Stream::Tcp(tcp) = self else {
            return;
        };
        let _ = tcp.set_nodelay(true);
        if keepalive > 0 {
            // As redis-server's anetKeepAlive: probes after `keepalive` idle seconds,
            // then every third of it, three times.
            let every = std::time::Duration::from_secs(keepalive);
            let params = socket2::TcpKeepalive::new()
                .with_time(every)
                .with_interval(std::time::Duration::from_secs((keepalive / 3).max(1)))
                .with_retries(3);
            let _ = socket2::SockRef::from(tcp).set_tcp_keepalive(&params);
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for Stream {
    #[inline]
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    /// On one `bind` address.
    Tcp(mio::net::TcpListener),
    /// The Unix socket, and its path (for its clients' addresses).
    Unix(mio::net::UnixListener, Arc<str>),
}

impl Listener {
    /// A client waiting to be accepted, and where it comes from.
    ///
    /// # Errors
    /// As `accept(2)`: `WouldBlock` when none waits.
    pub fn accept(&self) -> io::Result<(Stream, Origin)> {
        match self {
            Listener::Tcp(l) => {
                let (stream, peer) = l.accept()?;
                let local = stream.local_addr().ok();
                Ok((Stream::Tcp(stream), Origin::Tcp { peer, local }))
            }
            Listener::Unix(l, path) => {
                let (stream, _) = l.accept()?;
                Ok((Stream::Unix(stream), Origin::Unix(Arc::clone(path))))
            }
        }
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }
}

impl Source for Listener {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.register(r, t, i),
            Listener::Unix(l, _) => l.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.reregister(r, t, i),
            Listener::Unix(l, _) => l.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.deregister(r),
            Listener::Unix(l, _) => l.deregister(r),
        }
    }
}

/// The Unix socket at `path`, as redis-server opens it: a file left there is removed
/// first, and the socket's file takes mode `perm` when it is not 0 (`unixsocketperm`).
///
/// # Errors
/// redis-server's texts: a path too long, or `bind: <reason>` / `listen: <reason>`.
pub fn unix_listener(
    path: &str,
    perm: u32,
    backlog: i32,
) -> io::Result<std::os::unix::net::UnixListener> {
    use socket2::{Domain, SockAddr, Socket, Type};
    use std::os::unix::fs::PermissionsExt as _;
    // `sun_path`'s size, its last byte for the NUL.
    const SUN_PATH: usize = 108;
    if path.len() > SUN_PATH - 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "unix socket path too long ({}), must be under {SUN_PATH}",
                path.len()
            ),
        ));
    }
    let failed = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("{what}: {}", crate::util::strerror(&e)))
    };
    let _ = std::fs::remove_file(path);
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None).map_err(|e| failed("socket", e))?;
    let addr = SockAddr::unix(path).map_err(|e| failed("bind", e))?;
    socket.bind(&addr).map_err(|e| failed("bind", e))?;
    if perm != 0 {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm));
    }
    socket.listen(backlog).map_err(|e| failed("listen", e))?;
    socket
        .set_nonblocking(true)
        .map_err(|e| failed("listen", e))?;
    Ok(socket.into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_redis_shows_them() {
        let tcp = Origin::Tcp {
            peer: "127.0.0.1:5000".parse().unwrap(),
            local: Some("127.0.0.1:6379".parse().unwrap()),
        };
        assert_eq!(tcp.addr(), "127.0.0.1:5000");
        assert_eq!(tcp.laddr(), "127.0.0.1:6379");
        assert!(tcp.is_local() && !tcp.is_unix());
        let v6 = Origin::Tcp {
            peer: "[::1]:5000".parse().unwrap(),
            local: None,
        };
        assert_eq!(v6.addr(), "[::1]:5000");
        assert!(v6.is_local());
        let outside = Origin::Tcp {
            peer: "192.0.2.1:5000".parse().unwrap(),
            local: None,
        };
        assert!(!outside.is_local());
        let unix = Origin::Unix("/tmp/redis.sock".into());
        assert_eq!(unix.addr(), "/tmp/redis.sock:0");
        assert_eq!(unix.laddr(), "/tmp/redis.sock:0");
        assert_eq!(unix.monitor_addr(), "unix:/tmp/redis.sock");
        assert_eq!(tcp.monitor_addr(), "127.0.0.1:5000");
        assert!(unix.is_local() && unix.is_unix());
        assert_eq!(Origin::None.addr(), "");
        assert!(!Origin::None.is_local());
    }

    #[test]
    fn a_unix_socket_replaces_a_stale_file_and_takes_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("goblin-net-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let path = path.to_str().unwrap();
        std::fs::write(path, b"stale").unwrap();
        let listener = unix_listener(path, 0o700, 16).unwrap();
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let client = std::os::unix::net::UnixStream::connect(path);
        assert!(client.is_ok());
        drop(listener);
        let long = "x".repeat(108);
        let err = unix_listener(&long, 0, 16).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unix socket path too long (108), must be under 108"
        );
        let err = unix_listener("/nonexistent-dir/s.sock", 0, 16).unwrap_err();
        assert_eq!(err.to_string(), "bind: No such file or directory");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
