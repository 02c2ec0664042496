//! # goblin-protocol
//!
//! Goblin's RESP codec: the part of the server that turns bytes into commands and replies
//! into bytes, with no dependency on the rest of the workspace.
//!
//! - [`RequestDecoder`] decodes client requests — RESP multibulk arrays and inline
//!   commands — from a connection's read buffer without copying: arguments are ranges
//!   into that buffer. It is resumable (a large argument arriving in pieces is not
//!   rescanned) and enforces redis-server 7's limits with its exact error texts.
//! - [`Encoder`] writes replies straight into an output buffer in RESP2 or RESP3.
//! - [`parse_reply`] and [`reply_len`] read replies, for clients (the load generator and
//!   the tests).
//! - [`parse_i64`] is Redis's `string2ll`, the integer rule shared by the protocol and by
//!   command arguments.
//!
//! ```
//! use goblin_protocol::{Decoded, Encoder, RequestDecoder, Version};
//!
//! let mut input = b"*1\r\n$4\r\nPING\r\n".to_vec();
//! let mut decoder = RequestDecoder::default();
//! let Decoded::Command(len) = decoder.decode(&mut input).unwrap() else { panic!() };
//! assert_eq!(&input[decoder.args()[0].clone()], b"PING");
//! assert_eq!(len, input.len());
//!
//! let mut out = Vec::new();
//! Encoder::new(&mut out, Version::Resp2).simple(b"PONG");
//! assert_eq!(out, b"+PONG\r\n");
//! ```
#![deny(missing_docs)]

mod decode;
mod encode;
mod int;
mod reply;

pub use decode::{
    DEFAULT_MAX_BULK_LEN, DEFAULT_MAX_INLINE_LEN, DEFAULT_MAX_MULTIBULK_LEN, Decoded, Limits,
    ProtocolError, RequestDecoder, split_args,
};
pub use encode::{Encoder, Version, format_double};
pub use int::{parse_i64, push_int};
pub use reply::{Frame, ReplyError, parse_reply, reply_len};
