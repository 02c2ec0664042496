//! A sequential model of the string keyspace: the replies one connection alone should
//! see.

use std::collections::HashMap;

use crate::cmd::Cmd;
use crate::reply::{array, bulk_or_nil, int, ok, simple};

/// A sequential model of the string keyspace: what one connection alone should see.
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// The keys and their values.
    pub map: HashMap<Vec<u8>, Vec<u8>>,
    /// Commands queued by MULTI, when in a MULTI block.
    queued: Option<Vec<Cmd>>,
}

impl Model {
    /// Applies one command and returns the exact RESP2 reply Redis gives for it. Knows
    /// SET (no options), GET, DEL, UNLINK, EXISTS, TOUCH, MSET, MSETNX, MGET, RENAME,
    /// RENAMENX, PING, ECHO, DBSIZE, FLUSHALL, MULTI, EXEC and DISCARD, well-formed.
    ///
    /// # Panics
    /// On any other command.
    pub fn apply(&mut self, c: &[Vec<u8>]) -> Vec<u8> {
        let name = String::from_utf8_lossy(&c[0]).to_ascii_uppercase();
        if let Some(queue) = self.queued.as_mut() {
            match name.as_str() {
                "EXEC" => {
                    let queue = self.queued.take().unwrap_or_default();
                    let replies: Vec<Vec<u8>> = queue.iter().map(|q| self.apply(q)).collect();
                    return array(&replies);
                }
                "DISCARD" => {
                    self.queued = None;
                    return ok();
                }
                "MULTI" => return b"-ERR MULTI calls can not be nested\r\n".to_vec(),
                _ => {
                    queue.push(c.to_vec());
                    return simple("QUEUED");
                }
            }
        }
        let keys = &c[1..];
        match name.as_str() {
            "SET" => {
                self.map.insert(c[1].clone(), c[2].clone());
                ok()
            }
            "GET" => bulk_or_nil(self.map.get(&c[1]).map(Vec::as_slice)),
            "DEL" | "UNLINK" => {
                let n = keys
                    .iter()
                    .filter(|k| self.map.remove(k.as_slice()).is_some())
                    .count();
                int(n as i64)
            }
            "EXISTS" | "TOUCH" => {
                let n = keys.iter().filter(|k| self.map.contains_key(*k)).count();
                int(n as i64)
            }
            "MSET" => {
                for pair in keys.chunks(2) {
                    self.map.insert(pair[0].clone(), pair[1].clone());
                }
                ok()
            }
            "MSETNX" => {
                if keys.chunks(2).any(|p| self.map.contains_key(&p[0])) {
                    return int(0);
                }
                for pair in keys.chunks(2) {
                    self.map.insert(pair[0].clone(), pair[1].clone());
                }
                int(1)
            }
            "MGET" => array(
                &keys
                    .iter()
                    .map(|k| bulk_or_nil(self.map.get(k).map(Vec::as_slice)))
                    .collect::<Vec<_>>(),
            ),
            "RENAME" | "RENAMENX" => {
                let nx = name == "RENAMENX";
                let (src, dst) = (&c[1], &c[2]);
                let Some(value) = self.map.get(src).cloned() else {
                    return b"-ERR no such key\r\n".to_vec();
                };
                if src == dst {
                    return if nx { int(0) } else { ok() };
                }
                if nx && self.map.contains_key(dst) {
                    return int(0);
                }
                self.map.remove(src);
                self.map.insert(dst.clone(), value);
                if nx { int(1) } else { ok() }
            }
            "PING" => match c.get(1) {
                None => simple("PONG"),
                Some(msg) => bulk_or_nil(Some(msg)),
            },
            "ECHO" => bulk_or_nil(Some(&c[1])),
            "DBSIZE" => int(self.map.len() as i64),
            "FLUSHALL" => {
                self.map.clear();
                ok()
            }
            "MULTI" => {
                self.queued = Some(Vec::new());
                ok()
            }
            "EXEC" => b"-ERR EXEC without MULTI\r\n".to_vec(),
            "DISCARD" => b"-ERR DISCARD without MULTI\r\n".to_vec(),
            other => panic!("the model does not know {other}"),
        }
    }
}
