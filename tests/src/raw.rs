//! Raw RESP connections: requests encoded by hand, replies as the exact bytes sent.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use goblin_protocol::{Encoder, Version, reply_len};

use crate::REPLY_TIMEOUT;

/// Encodes a command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = Encoder::new(&mut out, Version::Resp2);
    enc.array(args.len());
    args.iter().for_each(|a| enc.bulk(a));
    out
}

/// A raw RESP connection: replies come back as the exact bytes the server sent.
#[derive(Debug)]
pub struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already returned.
    pos: usize,
}

impl Raw {
    /// Connects, or the error (the server may not listen yet).
    pub fn try_connect(port: u16) -> std::io::Result<Raw> {
        Raw::try_connect_to(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Connects to `addr`, or the error.
    pub fn try_connect_to(addr: std::net::SocketAddr) -> std::io::Result<Raw> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Raw {
            stream,
            buf: Vec::new(),
            pos: 0,
        })
    }

    /// Connects to a server on `port`.
    pub fn connect(port: u16) -> Raw {
        Raw::try_connect(port).unwrap()
    }

    /// Sends bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends bytes as they are, or returns the error that stopped it (the server closed
    /// the connection, say).
    ///
    /// # Errors
    /// The write's error.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a command and returns its reply's bytes.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&encode(args));
        self.reply()
    }

    /// Sends a command given as text split on spaces, and returns the reply's bytes.
    pub fn cmd_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.cmd(&args)
    }

    /// Reads one whole reply.
    pub fn reply(&mut self) -> Vec<u8> {
        self.try_reply().unwrap_or_else(|e| {
            panic!(
                "no reply: {e}; got so far {:?}",
                String::from_utf8_lossy(&self.buf)
            )
        })
    }

    /// Reads one whole reply, or the error that stopped it (timeout, close).
    pub fn try_reply(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            let pending = &self.buf[self.pos..];
            if let Some((n, _)) =
                reply_len(pending).map_err(|e| std::io::Error::other(e.to_string()))?
            {
                let reply = pending[..n].to_vec();
                self.pos += n;
                // Consumed bytes are dropped only once they are most of the buffer, so
                // that reading a long pipeline's replies stays linear.
                if self.pos == self.buf.len() {
                    self.buf.clear();
                    self.pos = 0;
                } else if self.pos > self.buf.len() / 2 {
                    self.buf.drain(..self.pos);
                    self.pos = 0;
                }
                return Ok(reply);
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the server closes the connection (or `timeout` passes); returns the
    /// bytes and whether it closed.
    pub fn read_to_close(&mut self, timeout: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut out = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        let mut chunk = [0u8; 65536];
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        self.stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        (out, closed)
    }

    /// The underlying stream.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}
