//! The oracle Lua scripts of the GOBLIN.* commands (docs: the command contract), and
//! loading them into a redis-server with SCRIPT LOAD before a run, so the claim and lock
//! workloads can send EVALSHA to redis where they send the native commands to Goblin.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use goblin_protocol::{Encoder, Frame, Version, parse_reply};

use crate::workload::Shas;

/// GOBLIN.CLAIM's oracle: `EVAL <script> 2 claim_key result_key token seconds`.
pub const CLAIM_SCRIPT: &str = r#"if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])
"#;

/// GOBLIN.CAD's oracle: `EVAL <script> 1 key value`.
pub const CAD_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
end
return 0
"#;

/// GOBLIN.PUBLISH's oracle (for a valid `seconds`):
/// `EVAL <script> 2 claim_key result_key token value seconds`.
pub const PUBLISH_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("set", KEYS[2], ARGV[2], "EX", ARGV[3])
  redis.call("expire", KEYS[1], ARGV[3])
  return 1
end
return 0
"#;

/// GOBLIN.RENEW's oracle: `EVAL <script> 1 claim_key token seconds`.
pub const RENEW_SCRIPT: &str = r#"if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("expire", KEYS[1], ARGV[2])
end
return 0
"#;

/// How long the set-up connection waits for the server.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends one command on a blocking connection and returns its reply's bytes.
///
/// # Errors
/// I/O failures, a closed connection or a malformed reply, as text.
pub fn call(stream: &mut TcpStream, args: &[&[u8]]) -> Result<Vec<u8>, String> {
    let mut req = Vec::new();
    let mut enc = Encoder::new(&mut req, Version::Resp2);
    enc.array(args.len());
    for a in args {
        enc.bulk(a);
    }
    stream.write_all(&req).map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match parse_reply(&buf) {
            Ok(Some((_, n))) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        let n = stream.read(&mut chunk).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed by the server".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Loads the oracle scripts into the redis-server at `addr`.
///
/// # Errors
/// A message when the server cannot be reached or refuses a script.
pub fn load(addr: SocketAddr) -> Result<Shas, String> {
    let mut stream = TcpStream::connect_timeout(&addr, SETUP_TIMEOUT)
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(SETUP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut one = |script: &str| -> Result<Vec<u8>, String> {
        let reply = call(&mut stream, &[b"SCRIPT", b"LOAD", script.as_bytes()])?;
        match parse_reply(&reply) {
            Ok(Some((Frame::Bulk(sha), _))) if sha.len() == 40 => Ok(sha.to_vec()),
            Ok(Some((Frame::Error(e), _))) => Err(format!(
                "SCRIPT LOAD failed: {}",
                String::from_utf8_lossy(e)
            )),
            _ => Err(format!(
                "SCRIPT LOAD: unexpected reply {:?}",
                String::from_utf8_lossy(&reply)
            )),
        }
    };
    Ok(Shas {
        claim: one(CLAIM_SCRIPT)?,
        cad: one(CAD_SCRIPT)?,
        publish: one(PUBLISH_SCRIPT)?,
        renew: one(RENEW_SCRIPT)?,
    })
}
