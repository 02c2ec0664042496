//! A command's arguments ([`Args`]), and a cursor that reads them in order
//! ([`ArgCursor`]).
//!
//! Option parsers walk their arguments with a cursor rather than with index arithmetic, in
//! the spirit of mini-redis's `Parse` and dragonfly's `CmdArgParser`: take the next
//! argument, test it against a keyword, read a typed value that answers Redis's error
//! reply when it is not one, and check at the end that nothing is left. What the cursor
//! does not do is decide precedence: which option conflicts with which, and which check
//! comes first, stays written out in each parser, in redis-server 7.0's order.
//!
//! A cursor is the arguments not yet read (two slices); reading never allocates or copies.
//! Keywords compare as Redis compares them, with `strcasecmp`: ASCII case ignored, and an
//! argument read only up to its first NUL byte (`SET k v nx\0junk` is `SET k v NX`).

use std::iter::FusedIterator;
use std::ops::Range;

use goblin_protocol::parse_i64;

use crate::errors::{self, ErrorReply};

/// A command's arguments (the name is argument 0): byte ranges into a buffer the command
/// does not own — the connection's read buffer, or the payload of a cross-shard message.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    buf: &'a [u8],
    spans: &'a [Range<usize>],
    /// `buf` is exactly this command's RESP frame, as the client sent it.
    framed: bool,
}

impl<'a> Args<'a> {
    /// Arguments `spans` within `buf`.
    pub fn new(buf: &'a [u8], spans: &'a [Range<usize>]) -> Self {
        Args {
            buf,
            spans,
            framed: false,
        }
    }

    /// Arguments `spans` within `frame`, the whole RESP multibulk request they were
    /// decoded from (a log can copy it rather than encode the command again).
    pub fn framed(frame: &'a [u8], spans: &'a [Range<usize>]) -> Self {
        Args {
            buf: frame,
            spans,
            framed: frame.first() == Some(&b'*'),
        }
    }

    /// The request as the client sent it, when it was a RESP multibulk frame (not an
    /// inline command): a RESP command with these arguments.
    pub fn frame(&self) -> Option<&'a [u8]> {
        self.framed.then_some(self.buf)
    }

    /// Runs `f` over arguments held one by one (a plan keeps its command's arguments so,
    /// to parse them again on another shard).
    pub fn with_owned<R>(args: &[Vec<u8>], f: impl FnOnce(&Args<'_>) -> R) -> R {
        let mut at = 0;
        let spans: Vec<Range<usize>> = args
            .iter()
            .map(|a| {
                at += a.len();
                at - a.len()..at
            })
            .collect();
        let buf = args.concat();
        f(&Args::new(&buf, &spans))
    }

    /// Number of arguments, the name included.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// The bytes of the command as a RESP array of bulk strings (as a client sends it).
    pub fn resp_len(&self) -> usize {
        let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as usize + 1;
        let arguments: usize = self
            .spans
            .iter()
            .map(|r| 1 + digits(r.len()) + 2 + r.len() + 2)
            .sum();
        1 + digits(self.len()) + 2 + arguments
    }

    /// True when there are no arguments (never, for a dispatched command).
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`, or the empty string past the end (arity is checked before handlers
    /// run, so a handler reading within its arity always gets the real argument).
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.spans
            .get(i)
            .and_then(|r| self.buf.get(r.clone()))
            .unwrap_or(b"")
    }

    /// Arguments from `from` on.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        self.cursor(from)
    }

    /// The arguments from `from` on, as the arguments of a command of their own (COMMAND
    /// GETKEYS looks at the command it is given this way).
    pub fn skip(&self, from: usize) -> Args<'a> {
        Args {
            buf: self.buf,
            spans: self.spans.get(from..).unwrap_or(&[]),
            framed: false,
        }
    }

    /// Whether argument `i` is the keyword `word`, as Redis compares keywords (see
    /// [`is_keyword`]).
    pub fn is(&self, i: usize, word: &str) -> bool {
        is_keyword(self.get(i), word)
    }

    /// A cursor reading the arguments from `from` on (nothing when `from` is past the
    /// end).
    pub fn cursor(&self, from: usize) -> ArgCursor<'a> {
        ArgCursor {
            rest: self.skip(from),
        }
    }
}

/// Whether `arg` is the keyword `word` as Redis compares option keywords, with
/// `strcasecmp`: ignoring ASCII case, and reading `arg` only up to its first NUL byte.
pub fn is_keyword(arg: &[u8], word: &str) -> bool {
    errors::c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// Reads a command's arguments in order; an [`Iterator`] over the arguments not yet read.
///
/// # Examples
///
/// ```
/// use goblin_server::errors::{self, ErrorReply};
/// use goblin_server::table::args::{Args, is_keyword};
///
/// /// SCAN's COUNT option (10 without one).
/// fn count(args: &Args<'_>) -> Result<i64, ErrorReply> {
///     let mut count = 10;
///     let mut c = args.cursor(2);
///     while let Some(opt) = c.next() {
///         if is_keyword(opt, "count") && !c.is_empty() {
///             count = c.next_i64()?;
///         } else {
///             return Err(errors::SYNTAX.into());
///         }
///     }
///     Ok(count)
/// }
///
/// // SCAN 0 COUNT 5
/// let spans = [0..4, 4..5, 5..10, 10..11];
/// assert_eq!(count(&Args::new(b"SCAN0COUNT5", &spans)), Ok(5));
/// // SCAN 0 count x
/// let spans = [0..4, 4..5, 5..10, 10..11];
/// assert_eq!(
///     count(&Args::new(b"SCAN0countx", &spans)),
///     Err(ErrorReply::Fixed(errors::NOT_INTEGER))
/// );
/// // SCAN 0 COUNT
/// assert_eq!(
///     count(&Args::new(b"SCAN0COUNT", &spans[..3])),
///     Err(ErrorReply::Fixed(errors::SYNTAX))
/// );
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ArgCursor<'a> {
    rest: Args<'a>,
}

impl<'a> ArgCursor<'a> {
    /// The next argument, without reading it.
    pub fn peek(&self) -> Option<&'a [u8]> {
        let span = self.rest.spans.first()?;
        Some(self.rest.buf.get(span.clone()).unwrap_or(b""))
    }

    /// Reads the next argument if it is the keyword `word` (see [`is_keyword`]); leaves
    /// it unread otherwise.
    pub fn next_is(&mut self, word: &str) -> bool {
        let found = self.peek().is_some_and(|a| is_keyword(a, word));
        if found {
            self.advance();
        }
        found
    }

    /// How many arguments are left to read.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Whether every argument has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The arguments not yet read, as [`Args`] of their own.
    pub fn rest(&self) -> Args<'a> {
        self.rest
    }

    /// Checks that every argument has been read.
    ///
    /// # Errors
    /// `ERR syntax error` when some are left.
    pub fn finish(&self) -> Result<(), ErrorReply> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(errors::SYNTAX.into())
        }
    }

    /// Reads the next argument, which must be there.
    ///
    /// # Errors
    /// `ERR syntax error` when there is none.
    pub fn next_arg(&mut self) -> Result<&'a [u8], ErrorReply> {
        self.next().ok_or(ErrorReply::Fixed(errors::SYNTAX))
    }

    /// Reads the next argument as `parse` reads it.
    ///
    /// # Errors
    /// `err` when `parse` refuses it; `ERR syntax error` when there is no argument.
    pub fn next_parsed<T>(
        &mut self,
        parse: impl FnOnce(&[u8]) -> Option<T>,
        err: &'static [u8],
    ) -> Result<T, ErrorReply> {
        parse(self.next_arg()?).ok_or(ErrorReply::Fixed(err))
    }

    /// Reads the next argument as a 64-bit integer (Redis's
    /// `getLongLongFromObjectOrReply`).
    ///
    /// # Errors
    /// `ERR value is not an integer or out of range`; `ERR syntax error` when there is no
    /// argument.
    pub fn next_i64(&mut self) -> Result<i64, ErrorReply> {
        self.next_parsed(parse_i64, errors::NOT_INTEGER)
    }

    /// Reads the next argument as a C `int` (Redis's `getIntFromObjectOrReply`): first a
    /// 64-bit integer, then in range.
    ///
    /// # Errors
    /// `ERR value is not an integer or out of range` when it is no 64-bit integer, `ERR
    /// value is out of range, value must between …` when it is one outside `int`'s range;
    /// `ERR syntax error` when there is no argument.
    pub fn next_i32(&mut self) -> Result<i32, ErrorReply> {
        let n = self.next_i64()?;
        i32::try_from(n).map_err(|_| ErrorReply::Fixed(errors::INT_OUT_OF_RANGE))
    }

    fn advance(&mut self) {
        self.rest = self.rest.skip(1);
    }
}

impl<'a> Iterator for ArgCursor<'a> {
    type Item = &'a [u8];

    /// Reads the next argument.
    fn next(&mut self) -> Option<&'a [u8]> {
        let arg = self.peek()?;
        self.advance();
        Some(arg)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

impl ExactSizeIterator for ArgCursor<'_> {}

impl FusedIterator for ArgCursor<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments as the connection stores them: one buffer, a span per argument.
    fn argv(words: &[&[u8]]) -> (Vec<u8>, Vec<Range<usize>>) {
        let mut buf = Vec::new();
        let mut spans = Vec::new();
        for w in words {
            let start = buf.len();
            buf.extend_from_slice(w);
            spans.push(start..buf.len());
            buf.extend_from_slice(b"\r\n");
        }
        (buf, spans)
    }

    #[test]
    fn reads_in_order_and_peeks_without_reading() {
        let (buf, spans) = argv(&[b"SCAN", b"0", b"COUNT", b"5"]);
        let args = Args::new(&buf, &spans);
        let mut c = args.cursor(1);
        assert_eq!(c.remaining(), 3);
        assert_eq!(c.peek(), Some(&b"0"[..]));
        assert_eq!(c.peek(), Some(&b"0"[..]));
        assert_eq!(c.next(), Some(&b"0"[..]));
        assert_eq!(c.len(), 2);
        assert_eq!(c.next(), Some(&b"COUNT"[..]));
        assert_eq!(c.rest().get(0), b"5");
        assert_eq!(c.next(), Some(&b"5"[..]));
        assert!(c.is_empty());
        assert_eq!(c.peek(), None);
        assert_eq!(c.next(), None);
        assert_eq!(c.next(), None);
        assert_eq!(c.finish(), Ok(()));
    }

    #[test]
    fn the_resp_length_is_what_a_client_sends() {
        let (buf, spans) = argv(&[b"client", b"list"]);
        assert_eq!(Args::new(&buf, &spans).resp_len(), 26);
        let long = vec![b'x'; 1234];
        let (buf, spans) = argv(&[b"SET", b"", &long]);
        assert_eq!(
            Args::new(&buf, &spans).resp_len(),
            b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$1234\r\n".len() + 1234 + 2
        );
    }

    #[test]
    fn starts_anywhere_even_past_the_end() {
        let (buf, spans) = argv(&[b"GET", b"k"]);
        let args = Args::new(&buf, &spans);
        assert_eq!(args.cursor(0).collect::<Vec<_>>(), [&b"GET"[..], b"k"]);
        assert_eq!(args.cursor(2).next(), None);
        assert!(args.cursor(7).is_empty());
        assert_eq!(args.cursor(7).finish(), Ok(()));
        assert_eq!(args.iter_from(1).collect::<Vec<_>>(), [&b"k"[..]]);
    }

    #[test]
    fn keywords_compare_as_strcasecmp() {
        assert!(is_keyword(b"nx", "NX"));
        assert!(is_keyword(b"Nx", "nx"));
        assert!(is_keyword(b"NX\0junk", "NX"));
        assert!(!is_keyword(b"NXX", "NX"));
        assert!(!is_keyword(b"N", "NX"));
        assert!(!is_keyword(b"", "NX"));
        assert!(!is_keyword(b"\0NX", "NX"));
        // Only ASCII case folds.
        assert!(!is_keyword("\u{212A}eepttl".as_bytes(), "KEEPTTL"));
    }

    #[test]
    fn next_is_reads_only_a_match() {
        let (buf, spans) = argv(&[b"FLUSHALL", b"async\0x", b"SYNC"]);
        let args = Args::new(&buf, &spans);
        let mut c = args.cursor(1);
        assert!(!c.next_is("SYNC"));
        assert_eq!(c.remaining(), 2);
        assert!(c.next_is("ASYNC"));
        assert_eq!(c.remaining(), 1);
        assert_eq!(c.finish(), Err(ErrorReply::Fixed(errors::SYNTAX)));
        assert!(c.next_is("sync"));
        assert!(!c.next_is("sync"));
        assert_eq!(c.finish(), Ok(()));
    }

    #[test]
    fn typed_reads_answer_redis_errors() {
        let (buf, spans) = argv(&[
            b"x",
            b"-42",
            b"4x",
            b"2147483647",
            b"2147483648",
            b"-2147483649",
            b"99999999999999999999",
            b" 1",
        ]);
        let args = Args::new(&buf, &spans);
        let mut c = args.cursor(1);
        assert_eq!(c.next_i64(), Ok(-42));
        assert_eq!(c.next_i64(), Err(ErrorReply::Fixed(errors::NOT_INTEGER)));
        assert_eq!(c.next_i32(), Ok(i32::MAX));
        assert_eq!(
            c.next_i32(),
            Err(ErrorReply::Fixed(errors::INT_OUT_OF_RANGE))
        );
        assert_eq!(
            c.next_i32(),
            Err(ErrorReply::Fixed(errors::INT_OUT_OF_RANGE))
        );
        assert_eq!(c.next_i32(), Err(ErrorReply::Fixed(errors::NOT_INTEGER)));
        assert_eq!(c.next_i64(), Err(ErrorReply::Fixed(errors::NOT_INTEGER)));
        // A failed read still consumes its argument; a missing one is a syntax error.
        assert!(c.is_empty());
        assert_eq!(c.next_i64(), Err(ErrorReply::Fixed(errors::SYNTAX)));
        assert_eq!(c.next_arg(), Err(ErrorReply::Fixed(errors::SYNTAX)));
        let first = |s: &[u8]| s.first().copied().filter(|&b| b == b'-');
        assert_eq!(
            args.cursor(1).next_parsed(first, errors::INVALID_CURSOR),
            Ok(b'-')
        );
        let refused = args.cursor(2).next_parsed(first, errors::INVALID_CURSOR);
        assert_eq!(refused, Err(ErrorReply::Fixed(errors::INVALID_CURSOR)));
    }

    #[test]
    fn copies_are_independent() {
        let (buf, spans) = argv(&[b"a", b"b"]);
        let args = Args::new(&buf, &spans);
        let mut c = args.cursor(0);
        let saved = c;
        c.next();
        assert_eq!(c.remaining(), 1);
        assert_eq!(saved.remaining(), 2);
    }
}
