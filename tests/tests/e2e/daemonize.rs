//! `daemonize yes`: to the background as redis-server goes — the command returns 0 at
//! once, the server (another process, leading its own session) writes its pid to
//! `pidfile`, serves, and removes the file at SHUTDOWN; not when a service manager
//! supervises it. Differential against redis-server.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use goblin_tests::{Kind, Raw, free_port, goblin_binary, scratch_dir};

/// A server of `kind` to start on `port` with `dir` as its directory, without `save`
/// rules, told to daemonize; its output discarded.
fn daemonizing(kind: Kind, port: u16, dir: &Path) -> Command {
    let mut command = Command::new(match kind {
        Kind::Goblin => goblin_binary(),
        Kind::Redis => PathBuf::from("redis-server"),
    });
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--daemonize", "yes"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Kills the daemon whose pid the file holds, and the launcher (a server that did not
/// go to the background), if the test ends before SHUTDOWN did.
struct Reaper(PathBuf, std::process::Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
        let _ = self.1.kill();
        let _ = self.1.wait();
    }
}

/// A line of `/proc/<pid>/stat`'s fields after the command name: (state, ppid, pgrp,
/// session).
fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = text.rsplit_once(") ")?.1;
    Some(after.split_whitespace().take(4).map(String::from).collect())
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one server did when told to daemonize.
fn daemon_view(kind: Kind) -> Vec<String> {
    let dir = scratch_dir("daemon");
    let pidfile = dir.join("server.pid");
    let port = free_port();
    let started = Instant::now();
    let launcher = daemonizing(kind, port, &dir)
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--logfile")
        .arg(dir.join("log"))
        .spawn()
        .unwrap();
    let launcher_pid = launcher.id();
    let mut reaper = Reaper(pidfile.clone(), launcher);
    let mut status = None;
    wait_until("the launcher exits", || {
        status = reaper.1.try_wait().unwrap();
        status.is_some()
    });
    let mut seen = vec![format!("launcher exit {:?}", status.and_then(|s| s.code()))];
    assert!(started.elapsed() < Duration::from_secs(5), "{kind:?}");
    let mut raw = None;
    wait_until("the daemon answers", || {
        raw = Raw::try_connect(port).ok();
        raw.is_some()
    });
    let mut raw = raw.unwrap();
    assert_eq!(raw.cmd(&[b"PING"]), b"+PONG\r\n");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    seen.push(format!(
        "daemon is another process: {}",
        pid != launcher_pid
    ));
    let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"server"])).into_owned();
    seen.push(format!(
        "INFO's pid is the file's: {}",
        info.contains(&format!("process_id:{pid}\r\n"))
    ));
    let fields = stat(pid).unwrap();
    // Its own session, led by itself.
    seen.push(format!("session leader: {}", fields[3] == pid.to_string()));
    let fd0 = std::fs::read_link(format!("/proc/{pid}/fd/0")).ok();
    seen.push(format!("stdin: {fd0:?}"));
    let _ = raw.try_send(&goblin_tests::encode(&[b"SHUTDOWN", b"NOSAVE"]));
    wait_until("the daemon exits", || stat(pid).is_none_or(|f| f[0] == "Z"));
    seen.push(format!("pidfile left: {}", Path::new(&pidfile).exists()));
    let _ = std::fs::remove_dir_all(&dir);
    seen
}

#[test]
fn daemonize_goes_to_the_background_as_redis_does() {
    let goblin = daemon_view(Kind::Goblin);
    let redis = daemon_view(Kind::Redis);
    assert_eq!(goblin, redis);
    assert_eq!(
        goblin,
        [
            "launcher exit Some(0)",
            "daemon is another process: true",
            "INFO's pid is the file's: true",
            "session leader: true",
            "stdin: Some(\"/dev/null\")",
            "pidfile left: false",
        ]
    );
}

/// Supervised by systemd (`$NOTIFY_SOCKET`), `daemonize yes` is ignored: the process
/// the manager started stays, and tells it READY.
#[test]
fn a_supervised_server_stays_in_the_foreground() {
    for kind in [Kind::Goblin, Kind::Redis] {
        let dir = scratch_dir("daemon-supervised");
        let notify_path = dir.join("notify");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let port = free_port();
        let child = daemonizing(kind, port, &dir)
            .args(["--supervised", "systemd"])
            .env("NOTIFY_SOCKET", &notify_path)
            .spawn()
            .unwrap();
        let child_pid = child.id();
        let mut reaper = Reaper(dir.join("no.pid"), child);
        let mut buf = [0u8; 256];
        let mut ready = false;
        while let Ok(n) = notify.recv(&mut buf) {
            if &buf[..n] == b"READY=1\n" {
                ready = true;
                break;
            }
        }
        assert!(ready, "{kind:?}: no READY");
        assert!(reaper.1.try_wait().unwrap().is_none(), "{kind:?} left");
        let mut raw = Raw::try_connect(port).unwrap();
        let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"server"])).into_owned();
        assert!(
            info.contains(&format!("process_id:{child_pid}\r\n")),
            "{kind:?}"
        );
        let _ = raw.try_send(&goblin_tests::encode(&[b"SHUTDOWN", b"NOSAVE"]));
        reaper.1.wait().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
