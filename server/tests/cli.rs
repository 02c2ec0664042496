//! The command line of the goblin-server binary. (Being an integration test of the server
//! crate, this also makes `cargo test --workspace` build the binary the end-to-end tests
//! in `tests/` start.)

use std::process::Command;

fn server() -> Command {
    Command::new(env!("CARGO_BIN_EXE_goblin-server"))
}

#[test]
fn help_lists_the_options() {
    let out = server().arg("--help").output().expect("run goblin-server");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in ["--bind", "--port", "--threads"] {
        assert!(text.contains(option), "{option} missing from --help");
    }
}

#[test]
fn version_is_printed() {
    let out = server()
        .arg("--version")
        .output()
        .expect("run goblin-server");
    assert!(out.status.success());
    // redis-server's line (tools read the version after ` v=`), naming Goblin's.
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(line.starts_with("Redis server v=7.0.15 "), "{line}");
    assert!(
        line.contains(&format!("(Goblin {})", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
}

#[test]
fn bad_options_exit_with_status_2() {
    for args in [
        &["--nope", "1"][..],
        &["--port", "x"],
        &["--port"],
        &["--threads", "-1"],
    ] {
        let out = server().args(args).output().expect("run goblin-server");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn an_address_in_use_is_reported() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = server()
        .args(["--bind", "127.0.0.1", "--port", &port])
        .output()
        .expect("run goblin-server");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}
