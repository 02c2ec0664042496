//! `supervised systemd`: what the service manager is told through `$NOTIFY_SOCKET`
//! (loading, ready once the dataset is loaded, stopping), as redis-server (built with
//! libsystemd, as Debian's is) tells it. Differential against redis-server.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use goblin_tests::{Kind, Raw, free_port, goblin_binary, scratch_dir, show};

/// A server of `kind` on `port` in `dir`, told to notify the socket at `notify`, with
/// `extra` arguments.
fn start(
    kind: Kind,
    port: u16,
    dir: &Path,
    notify: &Path,
    supervised: &str,
    extra: &[&str],
) -> Child {
    let mut command = match kind {
        Kind::Goblin => Command::new(goblin_binary()),
        Kind::Redis => Command::new("redis-server"),
    };
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--supervised", supervised, "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .env("NOTIFY_SOCKET", notify)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The messages sent to `socket` until `last` (or 10 s of silence).
fn messages_until(socket: &UnixDatagram, last: &str) -> Vec<String> {
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok(n) = socket.recv(&mut buf) {
        let message = String::from_utf8_lossy(&buf[..n]).into_owned();
        let done = message == last;
        got.push(message);
        if done {
            break;
        }
    }
    got
}

/// What the service manager heard from a server of `kind` started with a dataset of
/// 3,000 keys to load (slowly), and what a client saw the moment it heard READY.
fn supervised_view(kind: Kind, supervised: &str) -> Vec<String> {
    let dir = scratch_dir("supervised");
    let notify_path = dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let port = free_port();
    // The dataset: made by the server itself, saved, then loaded at the next start.
    let mut first = start(kind, port, &dir, &notify_path, "no", &[]);
    let mut raw = wait_for(port);
    let pairs: Vec<Vec<u8>> = (0..3000)
        .flat_map(|i| [format!("key:{i}").into_bytes(), b"value".to_vec()])
        .collect();
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    mset.extend(pairs.iter().map(Vec::as_slice));
    assert_eq!(raw.cmd(&mset), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"SAVE"]), b"+OK\r\n");
    let _ = raw.try_send(&goblin_tests::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    first.wait().unwrap();
    notify.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 512];
    assert!(notify.recv(&mut buf).is_err(), "{kind:?}: told with `no`");
    notify.set_nonblocking(false).unwrap();

    // Loading takes a while (100 µs a key): READY must wait for its end.
    let mut child = start(
        kind,
        port,
        &dir,
        &notify_path,
        supervised,
        &["--key-load-delay", "100"],
    );
    let mut seen = messages_until(&notify, "READY=1\n");
    // Ready means loaded: every key is there for the first command.
    let mut raw = Raw::try_connect(port).expect("listening once READY");
    seen.push(show(&raw.cmd(&[b"DBSIZE"])));
    let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"server"])).into_owned();
    let line = info
        .lines()
        .find(|l| l.starts_with("process_supervised:"))
        .unwrap_or_default()
        .to_string();
    seen.push(line);
    let _ = raw.try_send(&goblin_tests::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    seen.extend(messages_until(&notify, "STOPPING=1\n"));
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

/// A connection to the server on `port` once it answers PING.
fn wait_for(port: u16) -> Raw {
    for _ in 0..500 {
        if let Ok(mut raw) = Raw::try_connect(port)
            && raw.cmd(&[b"PING"]) == b"+PONG\r\n"
        {
            return raw;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no server on port {port}");
}

#[test]
fn systemd_hears_loading_ready_and_stopping_as_from_redis() {
    for supervised in ["systemd", "auto"] {
        let goblin = supervised_view(Kind::Goblin, supervised);
        let redis = supervised_view(Kind::Redis, supervised);
        assert_eq!(goblin, redis, "{supervised}");
        assert_eq!(
            goblin,
            [
                "STATUS=Redis is loading...\n",
                "STATUS=Ready to accept connections\n",
                "READY=1\n",
                ":3000\\r\\n",
                "process_supervised:systemd",
                "STOPPING=1\n",
            ],
            "{supervised}"
        );
    }
}
