//! A log's base in AOF form (`aof-use-rdb-preamble no`): the image a rewrite wrote as
//! an RDB file, turned into the commands redis-server's `rewriteAppendOnlyFileRio`
//! writes — a `SELECT` before each database's keys; `SET`, or `RPUSH`, `SADD`, `HMSET`,
//! `ZADD` of up to 64 items each, or a stream's `XADD`s, `XSETID`, `XGROUP CREATE`,
//! `XCLAIM … JUSTID FORCE` and `XGROUP CREATECONSUMER`; `PEXPIREAT` after a key with a
//! deadline; `FUNCTION LOAD` for each library. It runs on the thread that ends the
//! rewrite, reading the file back, so that the shards' loops write one format only.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use goblin_store::rdb::{self, RdbKey, RdbValue};
use goblin_store::types::stream::{Stream, StreamId};

use super::aof;

/// Items per command of a collection, as redis-server's `AOF_REWRITE_ITEMS_PER_CMD`.
const ITEMS_PER_CMD: usize = 64;

/// Writes `target` (through a temporary file beside it, synced, then renamed) with the
/// commands that rebuild what the RDB file at `rdb` holds, after a `#TS:` annotation of
/// `timestamp` when there is one; returns the file's length.
///
/// # Errors
/// When a file cannot be read or written, or the RDB file does not parse.
pub fn write_from_rdb(rdb_path: &Path, target: &Path, timestamp: Option<u64>) -> io::Result<u64> {
    let bytes = fs::read(rdb_path)?;
    let dir = target.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let result = (|| {
        let mut out = Writer {
            file: File::create(&tmp)?,
            buf: Vec::new(),
            db: None,
            len: 0,
        };
        if let Some(secs) = timestamp {
            out.buf
                .extend_from_slice(aof::timestamp_annotation(secs).as_bytes());
        }
        // Each database's keys once, in order, as redis-server writes them: the shards'
        // records interleave their databases in the image, so it is read once per
        // database that holds keys (once, when only database 0 does).
        let mut dbs = BTreeSet::new();
        let mut db = 0;
        let info = loop {
            let info = rdb::read(&bytes, |k| {
                if k.db == db {
                    out.key(k)
                        .map_err(|e| rdb::RdbError::Refused(e.to_string()))
                } else {
                    if k.db > db {
                        dbs.insert(k.db);
                    }
                    Ok(())
                }
            })
            .map_err(|e| io::Error::other(e.to_string()))?;
            match dbs.pop_first() {
                Some(next) => db = next,
                None => break info,
            }
        };
        // (After the keys, where redis-server writes them first: the libraries are in
        // the RDB file's header, known once it is read. Loading is the same.)
        for code in &info.functions {
            aof::command(
                &mut out.buf,
                3,
                [&b"FUNCTION"[..], b"LOAD", code].into_iter(),
            );
        }
        out.flush()?;
        out.file.sync_all()?;
        Ok(out.len)
    })();
    match result {
        Ok(len) => {
            fs::rename(&tmp, target)?;
            aof::sync_dir(dir)?;
            Ok(len)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The file being written, and the commands not written yet (written out in pieces of
/// 64 KiB or more).
struct Writer {
    file: File,
    buf: Vec<u8>,
    /// The database the last key was of.
    db: Option<u64>,
    len: u64,
}

impl Writer {
    fn flush(&mut self) -> io::Result<()> {
        self.len += self.buf.len() as u64;
        self.file.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn cmd(&mut self, args: &[&[u8]]) {
        aof::command(&mut self.buf, args.len(), args.iter().copied());
    }

    /// One key's commands (none for an empty collection, which redis-server would not
    /// hold), then its deadline.
    fn key(&mut self, k: RdbKey) -> io::Result<()> {
        let key = k.key.as_slice();
        let written = match &k.value {
            RdbValue::Str(s) => {
                self.select(k.db);
                self.cmd(&[b"SET", key, s]);
                true
            }
            RdbValue::List(items) => self.batches(k.db, b"RPUSH", key, items, |i| vec![i]),
            RdbValue::Set(members) => self.batches(k.db, b"SADD", key, members, |m| vec![m]),
            RdbValue::Hash(pairs) => self.batches(k.db, b"HMSET", key, pairs, |(f, v)| vec![f, v]),
            RdbValue::ZSet(members) => {
                let scores: Vec<(Vec<u8>, &[u8])> = members
                    .iter()
                    .map(|(m, score)| {
                        let mut buf = [0u8; 32];
                        (
                            goblin_protocol::format_double(*score, &mut buf).to_vec(),
                            m.as_slice(),
                        )
                    })
                    .collect();
                self.batches(k.db, b"ZADD", key, &scores, |(s, m)| vec![s, m])
            }
            RdbValue::Stream(stream) => {
                self.select(k.db);
                self.stream(key, stream);
                true
            }
        };
        if written && let Some(at) = k.expire_at {
            let at = at.to_string();
            self.cmd(&[b"PEXPIREAT", key, at.as_bytes()]);
        }
        if self.buf.len() >= 64 << 10 {
            self.flush()?;
        }
        Ok(())
    }

    /// `SELECT` when the key is of another database than the last.
    fn select(&mut self, db: u64) {
        if self.db != Some(db) {
            self.db = Some(db);
            let n = db.to_string();
            self.cmd(&[b"SELECT", n.as_bytes()]);
        }
    }

    /// A collection's items, [`ITEMS_PER_CMD`] to a command; false when it has none.
    fn batches<T>(
        &mut self,
        db: u64,
        name: &[u8],
        key: &[u8],
        items: &[T],
        args: impl Fn(&T) -> Vec<&[u8]>,
    ) -> bool {
        if items.is_empty() {
            return false;
        }
        self.select(db);
        for chunk in items.chunks(ITEMS_PER_CMD) {
            let mut argv: Vec<&[u8]> = vec![name, key];
            for item in chunk {
                argv.extend(args(item));
            }
            self.cmd(&argv);
        }
        true
    }

    /// A stream, as redis-server's `rewriteStreamObject`.
    fn stream(&mut self, key: &[u8], s: &Stream) {
        let id = |id: StreamId| id.to_string();
        if s.length == 0 {
            // An empty stream: the `XADD MAXLEN 0` trick.
            self.cmd(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
        } else {
            let mut from = StreamId::MIN;
            loop {
                let entries = s.range(from, StreamId::MAX, false, 1024);
                for e in &entries {
                    let entry_id = id(e.id);
                    let mut argv: Vec<&[u8]> = vec![b"XADD", key, entry_id.as_bytes()];
                    argv.extend(e.fields.iter().map(Vec::as_slice));
                    self.cmd(&argv);
                }
                match entries.last().and_then(|e| e.id.incr()) {
                    Some(next) if entries.len() == 1024 => from = next,
                    _ => break,
                }
            }
        }
        let (last, added, deleted) = (
            id(s.last_id),
            s.entries_added.to_string(),
            id(s.max_deleted),
        );
        self.cmd(&[
            b"XSETID",
            key,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            deleted.as_bytes(),
        ]);
        for (name, group) in &s.groups {
            let (last, read) = (id(group.last_id), group.entries_read.to_string());
            self.cmd(&[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                last.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ]);
            for (consumer, c) in &group.consumers {
                if c.pel.is_empty() {
                    self.cmd(&[b"XGROUP", b"CREATECONSUMER", key, name, consumer]);
                    continue;
                }
                for pending in &c.pel {
                    let Some(nack) = group.pel.get(pending) else {
                        continue;
                    };
                    let (pending, time, count) = (
                        id(*pending),
                        nack.delivery_time.to_string(),
                        nack.delivery_count.to_string(),
                    );
                    self.cmd(&[
                        b"XCLAIM",
                        key,
                        name,
                        consumer,
                        b"0",
                        pending.as_bytes(),
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goblin_store::rdb::RdbWriter;

    /// The shards' records interleave their databases in the image; the base names
    /// each database once, in order, with all of its keys.
    #[test]
    fn each_database_is_written_once_in_order() {
        let mut image = RdbWriter::new(&[]);
        for (db, key) in [(3, "c"), (0, "a"), (3, "d"), (1, "e"), (0, "b")] {
            image.select(db);
            image.string_key(key.as_bytes(), b"v", None);
        }
        let dir = std::env::temp_dir().join(format!("aof-base-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let (rdb, base) = (dir.join("image.rdb"), dir.join("base.aof"));
        fs::write(&rdb, image.finish()).expect("image");
        write_from_rdb(&rdb, &base, None).expect("base");
        let text = String::from_utf8(fs::read(&base).expect("read")).expect("text");
        let _ = fs::remove_dir_all(&dir);
        let words: Vec<&str> = text
            .split("\r\n")
            .filter(|w| !w.starts_with(['*', '$']) && !w.is_empty())
            .collect();
        assert_eq!(
            words,
            [
                "SELECT", "0", "SET", "a", "v", "SET", "b", "v", "SELECT", "1", "SET", "e", "v",
                "SELECT", "3", "SET", "c", "v", "SET", "d", "v"
            ]
        );
    }
}
