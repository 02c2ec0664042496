//! Real clients: the `redis` crate, redis-cli, redis-benchmark.

use std::process::Command;

use goblin_tests::Server;
use redis::Commands;

#[test]
fn the_redis_crate_connects_and_works() {
    let server = Server::goblin();
    let mut con = server.client();
    let _: () = con.set("greeting", "hello").unwrap();
    let got: String = con.get("greeting").unwrap();
    assert_eq!(got, "hello");
    let missing: Option<String> = con.get("missing").unwrap();
    assert_eq!(missing, None);
    let _: () = con.set_ex("temp", "x", 100).unwrap();
    let ttl: i64 = con.ttl("temp").unwrap();
    assert!((99..=100).contains(&ttl));
    let n: i64 = con.del(&["greeting", "temp", "missing"]).unwrap();
    assert_eq!(n, 2);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let err = redis::cmd("NOPE").query::<String>(&mut con).unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
    // The connection stays usable after an error reply.
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 0);
}

#[test]
fn the_redis_crate_pipelines_in_resp3() {
    let server = Server::goblin();
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", server.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    let (a, b): (String, Option<String>) = redis::pipe()
        .set("a", "1")
        .ignore()
        .get("a")
        .get("b")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b), ("1", None));
}

fn tool(name: &str) -> Command {
    if Command::new(name).arg("--version").output().is_err() {
        panic!("{name} is not installed: apt-get install -y redis-tools (scripts/test does it)");
    }
    Command::new(name)
}

#[test]
fn redis_cli_works() {
    let server = Server::goblin();
    let port = server.port.to_string();
    let run = |args: &[&str]| {
        let out = tool("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["PING"]), "PONG\n");
    assert_eq!(run(&["SET", "cli", "works", "EX", "60"]), "OK\n");
    assert_eq!(run(&["GET", "cli"]), "works\n");
    assert_eq!(run(&["DBSIZE"]), "1\n");
    // redis-cli prints an error reply, then a newline of its own.
    assert_eq!(
        run(&["NOPE", "x"]),
        "ERR unknown command 'NOPE', with args beginning with: 'x' \n\n"
    );
    // Interactive mode reads commands from stdin; it fetches COMMAND DOCS on start.
    let mut child = tool("redis-cli")
        .args(["-p", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"SET a 1\nGET a\nTTL a\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "OK\n1\n-1\n");
}

#[test]
fn redis_benchmark_runs_without_errors() {
    let server = Server::goblin();
    let out = tool("redis-benchmark")
        .args([
            "-p",
            &server.port.to_string(),
            "-t",
            "ping,set,get",
            "-P",
            "16",
            "-n",
            "20000",
            "-q",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        !text.contains("ERR") && !text.to_lowercase().contains("error"),
        "{text}"
    );
    for test in ["PING_INLINE", "PING_MBULK", "SET", "GET"] {
        assert!(
            text.contains(&format!("{test}: ")),
            "{test} missing:\n{text}"
        );
    }
}
