//! `unixsocket`: clients through a Unix socket, as redis-server serves them — its
//! file's mode, their addresses and flag, MONITOR's lines, CLIENT KILL, port 0 for the
//! socket alone, and the file removed at SHUTDOWN. Differential against redis-server.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use goblin_tests::{Kind, Raw, Server, encode, free_port, goblin_binary, scratch_dir};

/// A redis connection through the socket at `path`.
fn unix_client(path: &Path) -> redis::Connection {
    redis::Client::open(format!("unix://{}", path.display()))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// A field of a CLIENT INFO line.
fn field<'a>(info: &'a str, name: &str) -> &'a str {
    info.split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
}

/// The server of `kind`, listening on a free TCP port and on the socket at `path`.
fn with_socket(kind: Kind, path: &Path) -> Server {
    let args = [
        "--unixsocket",
        path.to_str().unwrap(),
        "--unixsocketperm",
        "0700",
    ];
    match kind {
        // (Goblin's harness gives port 0, which with a socket would be no TCP.)
        Kind::Goblin => {
            let port = free_port().to_string();
            Server::goblin_with(&[&args[..], &["--threads", "2", "--port", &port]].concat())
        }
        Kind::Redis => Server::redis_with(&args),
    }
}

/// What a server showed of the socket and its clients, with its path written `<sock>`.
fn socket_view(kind: Kind) -> Vec<String> {
    let dir = scratch_dir("unix");
    let path = dir.join("s.sock");
    let server = with_socket(kind, &path);
    let sock = path.to_str().unwrap();
    let mut seen = Vec::new();
    let mode = std::fs::metadata(&path).unwrap();
    assert!(mode.file_type().is_socket(), "{kind:?}");
    seen.push(format!("mode {:o}", mode.permissions().mode() & 0o777));
    let mut c = unix_client(&path);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    seen.push(v);
    for name in ["unixsocket", "unixsocketperm"] {
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(&mut c)
            .unwrap();
        seen.push(got.join(" ").replace(sock, "<sock>"));
    }
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    for name in ["addr", "laddr", "flags"] {
        seen.push(format!(
            "{name}={}",
            field(&info, name).replace(sock, "<sock>")
        ));
    }
    // A TCP client beside it: no `U`.
    let mut tcp = server.client();
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut tcp).unwrap();
    seen.push(format!("tcp flags={}", field(&info, "flags")));
    // Its CONFIG SET is refused (it is fixed at start).
    let refused = redis::cmd("CONFIG")
        .arg("SET")
        .arg("unixsocket")
        .arg("/tmp/other.sock")
        .query::<()>(&mut tcp)
        .unwrap_err();
    seen.push(refused.to_string());
    // MONITOR shows a socket client as `unix:<path>`.
    let mut monitor = UnixStream::connect(&path).unwrap();
    monitor.write_all(&encode(&[b"MONITOR"])).unwrap();
    let mut lines = BufReader::new(monitor.try_clone().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    seen.push(line.trim_end().to_string());
    let _: i64 = redis::cmd("EXISTS").arg("k").query(&mut c).unwrap();
    line.clear();
    lines.read_line(&mut line).unwrap();
    let shown = line.split_once(' ').map_or("", |(_, rest)| rest).trim_end();
    seen.push(shown.replace(sock, "<sock>"));
    // CLIENT KILL by that address (all three socket clients have it).
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ADDR")
        .arg(format!("{sock}:0"))
        .arg("SKIPME")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    seen.push(format!("killed {killed}"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

#[test]
fn clients_through_the_unix_socket_look_as_in_redis() {
    let goblin = socket_view(Kind::Goblin);
    let redis = socket_view(Kind::Redis);
    assert_eq!(goblin, redis);
    // What both said, for the reader (and against a change on both sides at once).
    assert_eq!(goblin[0], "mode 700");
    assert_eq!(goblin[4], "addr=<sock>:0");
    assert_eq!(goblin[6], "flags=U");
    assert_eq!(goblin[7], "tcp flags=N");
    assert_eq!(goblin[10], "[0 unix:<sock>] \"EXISTS\" \"k\"");
    assert_eq!(goblin[11], "killed 1");
}

/// `bind ""`: no TCP address, the socket alone, and back.
fn bind_nothing_view(kind: Kind) -> Vec<String> {
    let dir = scratch_dir("unix-bind");
    let path = dir.join("s.sock");
    let server = with_socket(kind, &path);
    let mut c = unix_client(&path);
    let mut seen = Vec::new();
    let mut config = |args: &[&str]| -> String {
        let mut cmd = redis::cmd("CONFIG");
        for a in args {
            cmd.arg(*a);
        }
        match cmd.query::<redis::Value>(&mut c) {
            Ok(v) => format!("{v:?}"),
            Err(e) => e.to_string(),
        }
    };
    seen.push(config(&["SET", "bind", ""]));
    seen.push(config(&["GET", "bind"]));
    std::thread::sleep(Duration::from_millis(100));
    seen.push(format!("tcp: {}", Raw::try_connect(server.port).is_ok()));
    seen.push(config(&["SET", "bind", "127.0.0.1"]));
    std::thread::sleep(Duration::from_millis(100));
    let mut tcp = Raw::try_connect(server.port).expect("TCP again");
    seen.push(goblin_tests::show(&tcp.cmd(&[b"PING"])));
    // The socket still takes new clients after both changes.
    let pong: String = redis::cmd("PING").query(&mut unix_client(&path)).unwrap();
    seen.push(pong);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

#[test]
fn bind_nothing_leaves_the_unix_socket() {
    let goblin = bind_nothing_view(Kind::Goblin);
    let redis = bind_nothing_view(Kind::Redis);
    assert_eq!(goblin, redis);
    assert_eq!(goblin[2], "tcp: false");
    assert_eq!(goblin[4], "+PONG\\r\\n");
    assert_eq!(goblin[5], "PONG");
}

/// Starts `kind` with port 0 and the socket at `path` (no TCP), and waits until the
/// socket answers.
fn socket_only(kind: Kind, path: &Path) -> std::process::Child {
    let path_text = path.to_str().unwrap();
    let mut command = match kind {
        Kind::Goblin => Command::new(goblin_binary()),
        Kind::Redis => Command::new("redis-server"),
    };
    command.args(["--port", "0", "--bind", "127.0.0.1", "--save", ""]);
    command.args(["--unixsocket", path_text]);
    command.arg("--dir").arg(path.parent().unwrap());
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let answers = || {
        UnixStream::connect(path).ok().and_then(|mut s| {
            s.write_all(&encode(&[b"PING"])).ok()?;
            let mut reply = String::new();
            BufReader::new(s).read_line(&mut reply).ok()?;
            Some(reply)
        }) == Some("+PONG\r\n".to_string())
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ready = answers();
    while !ready && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        ready = answers();
    }
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{kind:?} does not answer on {}", path.display());
    }
    child
}

/// What a server with port 0 and a socket did: whether a stale file was in its way,
/// whether it listened on TCP, and what SHUTDOWN left.
fn port_zero_view(kind: Kind) -> Vec<String> {
    let dir = scratch_dir("unix-only");
    let path: PathBuf = dir.join("only.sock");
    // A file left where the socket goes (a crash's): replaced.
    std::fs::write(&path, b"stale").unwrap();
    let mut child = socket_only(kind, &path);
    let mut seen = Vec::new();
    let mut c = unix_client(&path);
    let port: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("port")
        .query(&mut c)
        .unwrap();
    seen.push(port.join(" "));
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "{kind:?} did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    seen.push(format!("exit {:?}", status.code()));
    seen.push(format!("socket file left: {}", path.exists()));
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

#[test]
fn port_zero_with_a_unix_socket_listens_on_the_socket_alone() {
    let goblin = port_zero_view(Kind::Goblin);
    let redis = port_zero_view(Kind::Redis);
    assert_eq!(goblin, redis);
    assert_eq!(
        goblin,
        ["port 0", "exit Some(0)", "socket file left: false"]
    );
}

/// Runs `command`, a server expected to refuse to start: its exit code and what it
/// printed. One still running after 10 s is killed (it started: a failure).
fn refused_start(mut command: Command) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let all = [output.stdout, output.stderr].concat();
    (
        output.status.code(),
        String::from_utf8_lossy(&all).into_owned(),
    )
}

#[test]
fn a_socket_that_cannot_be_opened_stops_the_start() {
    let dir = scratch_dir("unix-bad");
    let path = dir.join("missing").join("s.sock");
    let mut goblin = Command::new(goblin_binary());
    goblin
        .args(["--port", "0", "--bind", "127.0.0.1", "--save", ""])
        .arg("--unixsocket")
        .arg(&path);
    let (code, text) = refused_start(goblin);
    assert_eq!(code, Some(1));
    assert!(
        text.contains("Failed opening Unix socket: bind: No such file or directory"),
        "{text}"
    );
    // No address and no socket: nowhere to listen.
    for bin in [goblin_binary(), PathBuf::from("redis-server")] {
        let mut command = Command::new(&bin);
        command.args(["--port", "6399", "--bind", ""]);
        let (code, text) = refused_start(command);
        assert_eq!(code, Some(1), "{bin:?}");
        assert!(text.contains("Configured to not listen anywhere"), "{text}");
    }
    // A mode that is not octal, or past 0777, is refused as redis-server refuses it.
    for (perm, error) in [
        ("800", "argument couldn't be parsed as an octal number"),
        ("1000", "argument must be between 0 and 777 inclusive"),
    ] {
        let mut texts = Vec::new();
        for bin in [goblin_binary(), PathBuf::from("redis-server")] {
            let mut command = Command::new(bin);
            command.args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--unixsocketperm",
                perm,
            ]);
            let (code, text) = refused_start(command);
            assert_ne!(code, Some(0));
            texts.push(text);
        }
        for text in &texts {
            assert!(text.contains(error), "{perm}: {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
