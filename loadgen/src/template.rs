//! `--command` templates: a command line whose `__rand_int__` placeholders are replaced,
//! per request and independently for each occurrence, by a key index written as 12
//! zero-padded digits — redis-benchmark's convention, so the same template means the same
//! traffic in both tools.

use goblin_protocol::Encoder;

use crate::keys::{KEY_DIGITS, KeySampler, pad12};
use crate::rng::Rng;

/// The placeholder, as redis-benchmark spells it.
pub const PLACEHOLDER: &str = "__rand_int__";

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(Vec<u8>),
    RandInt,
}

/// A parsed command template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    args: Vec<Vec<Segment>>,
}

impl Default for Template {
    /// `PING`.
    fn default() -> Self {
        Template {
            args: vec![vec![Segment::Literal(b"PING".to_vec())]],
        }
    }
}

impl Template {
    /// Parses a command line: arguments split on whitespace, `"…"` or `'…'` quoting an
    /// argument that holds spaces (with `\"`, `\\`, `\n`, `\r`, `\t` escapes inside double
    /// quotes).
    ///
    /// # Errors
    /// An empty template or an unbalanced quote.
    pub fn parse(line: &str) -> Result<Template, String> {
        let args = split_args(line)?;
        if args.is_empty() {
            return Err("the command template is empty".into());
        }
        let args = args
            .into_iter()
            .map(|arg| {
                let mut segs = Vec::new();
                let mut rest = arg.as_str();
                while let Some(at) = rest.find(PLACEHOLDER) {
                    if at > 0 {
                        segs.push(Segment::Literal(rest.as_bytes()[..at].to_vec()));
                    }
                    segs.push(Segment::RandInt);
                    rest = &rest[at + PLACEHOLDER.len()..];
                }
                if !rest.is_empty() || segs.is_empty() {
                    segs.push(Segment::Literal(rest.as_bytes().to_vec()));
                }
                segs
            })
            .collect();
        Ok(Template { args })
    }

    /// True when some argument holds a placeholder.
    pub fn is_random(&self) -> bool {
        self.args.iter().flatten().any(|s| *s == Segment::RandInt)
    }

    /// Encodes one request into `out`, drawing a key index for every placeholder; `scratch`
    /// is a reusable buffer, so a steady stream of requests allocates nothing.
    pub fn encode(
        &self,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        keys: &KeySampler,
        rng: &mut Rng,
    ) {
        let mut enc = Encoder::new(out, goblin_protocol::Version::Resp2);
        enc.array(self.args.len());
        for arg in &self.args {
            scratch.clear();
            for seg in arg {
                match seg {
                    Segment::Literal(b) => scratch.extend_from_slice(b),
                    Segment::RandInt => {
                        let mut digits = [0u8; KEY_DIGITS];
                        pad12(keys.sample(rng), &mut digits);
                        scratch.extend_from_slice(&digits);
                    }
                }
            }
            enc.bulk(scratch);
        }
    }
}

fn split_args(line: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        let mut arg = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("unbalanced {first} quote in {line:?}")),
                    Some(c) if c == first => break,
                    Some('\\') if first == '"' => match chars.next() {
                        Some('n') => arg.push('\n'),
                        Some('r') => arg.push('\r'),
                        Some('t') => arg.push('\t'),
                        Some(c) => arg.push(c),
                        None => return Err(format!("unbalanced {first} quote in {line:?}")),
                    },
                    Some(c) => arg.push(c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err(format!(
                    "a closing quote must be followed by a space in {line:?}"
                ));
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                arg.push(c);
            }
        }
        args.push(arg);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::keys::KeyDist;

    fn encode_once(t: &Template, keyspace: u64) -> Vec<u8> {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let keys = KeySampler::new(KeyDist::Uniform, keyspace);
        t.encode(&mut out, &mut scratch, &keys, &mut Rng::new(1));
        out
    }

    #[test]
    fn placeholders_become_padded_indexes() {
        let t = Template::parse("SET key:__rand_int__ v").unwrap();
        assert!(t.is_random());
        assert_eq!(
            encode_once(&t, 1),
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000000\r\n$1\r\nv\r\n"
        );
        let t = Template::parse("MSET __rand_int____rand_int__ x").unwrap();
        assert_eq!(
            &encode_once(&t, 1)[..31],
            b"*3\r\n$4\r\nMSET\r\n$24\r\n000000000000"
        );
    }

    #[test]
    fn quoting() {
        let t = Template::parse(r#"SET "a b" 'c d' "e\"f""#).unwrap();
        assert!(!t.is_random());
        assert_eq!(
            encode_once(&t, 1),
            b"*4\r\n$3\r\nSET\r\n$3\r\na b\r\n$3\r\nc d\r\n$3\r\ne\"f\r\n".to_vec()
        );
        assert_eq!(
            encode_once(&Template::parse("ECHO \"\"").unwrap(), 1),
            b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
        );
        assert!(Template::parse("SET \"a").is_err());
        assert!(Template::parse("SET \"a\"b").is_err());
        assert!(Template::parse("   ").is_err());
    }
}
