//! Commands as owned words: built from words or from script lines (with `K0`, `K1`, …
//! standing for keys), shown in failure messages, sent one by one or pipelined.

use crate::{Raw, encode, show};

/// A command as owned arguments.
pub type Cmd = Vec<Vec<u8>>;

/// A command from words.
pub fn cmd<S: AsRef<[u8]>>(words: &[S]) -> Cmd {
    words.iter().map(|w| w.as_ref().to_vec()).collect()
}

/// `name k1 v k2 v …` for every key, or `name k1 k2 …` when `value` is `None`.
pub fn over_keys(name: &str, keys: &[String], value: Option<&str>) -> Cmd {
    let mut c = cmd(&[name]);
    for k in keys {
        c.push(k.as_bytes().to_vec());
        if let Some(v) = value {
            c.push(v.as_bytes().to_vec());
        }
    }
    c
}

/// The words of a command line, split on blanks; a word in double quotes may hold
/// blanks and the escapes `\r`, `\n`, `\t`, `\0`, `\xHH` (any byte), `\"` and `\\`.
///
/// # Panics
/// On an unterminated quote, a bad `\x` escape or a trailing backslash.
pub fn words(line: &str) -> Cmd {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let push = |c: char, word: &mut Vec<u8>| {
        let mut buf = [0u8; 4];
        word.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    };
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return out;
        };
        let mut word = Vec::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => panic!("unterminated quote in {line:?}"),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('r') => word.push(b'\r'),
                        Some('n') => word.push(b'\n'),
                        Some('t') => word.push(b'\t'),
                        Some('0') => word.push(0),
                        Some('x') => {
                            let hex: String = chars.by_ref().take(2).collect();
                            let byte = u8::from_str_radix(&hex, 16)
                                .ok()
                                .filter(|_| hex.len() == 2)
                                .unwrap_or_else(|| panic!("bad \\x escape in {line:?}"));
                            word.push(byte);
                        }
                        Some(c) => push(c, &mut word),
                        None => panic!("a trailing backslash in {line:?}"),
                    },
                    Some(c) => push(c, &mut word),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                push(c, &mut word);
                chars.next();
            }
        }
        out.push(word);
    }
}

/// Replaces each word `K<n>` by the `n`th of `keys`.
///
/// # Panics
/// When there are not that many keys.
pub fn substitute(args: Cmd, keys: &[String]) -> Cmd {
    args.into_iter()
        .map(|w| {
            let index = w
                .strip_prefix(b"K")
                .filter(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok());
            match index {
                None => w,
                Some(i) => keys
                    .get(i)
                    .unwrap_or_else(|| panic!("K{i} but only {} keys", keys.len()))
                    .as_bytes()
                    .to_vec(),
            }
        })
        .collect()
}

/// The command lines of a script: one per line, trimmed, blank lines and `#` comments
/// skipped.
pub fn script_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The commands of a script (see [`script_lines`] and [`words`]), `K0`, `K1`, … standing
/// for `keys`.
pub fn script_commands(text: &str, keys: &[String]) -> Vec<Cmd> {
    script_lines(text)
        .map(|line| substitute(words(line), keys))
        .collect()
}

/// Borrowed arguments of a command, as [`Raw::cmd`] takes them.
pub fn args(c: &[Vec<u8>]) -> Vec<&[u8]> {
    c.iter().map(Vec::as_slice).collect()
}

/// Sends one command and returns its reply.
pub fn call(raw: &mut Raw, c: &[Vec<u8>]) -> Vec<u8> {
    raw.cmd(&args(c))
}

/// Sends every command in one write, then reads one reply per command.
///
/// # Panics
/// When a reply does not come, naming the command and those before it.
pub fn pipeline(raw: &mut Raw, cmds: &[Cmd]) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    for c in cmds {
        bytes.extend(encode(&args(c)));
    }
    raw.send(&bytes);
    cmds.iter()
        .enumerate()
        .map(|(i, c)| {
            raw.try_reply().unwrap_or_else(|e| {
                let from = i.saturating_sub(8);
                let before: Vec<String> = cmds[from..i].iter().map(|c| show_cmd(c)).collect();
                panic!(
                    "no reply to pipelined command {i} of {} ({}): {e}; the commands before \
                     it: {before:?}",
                    cmds.len(),
                    show_cmd(c)
                )
            })
        })
        .collect()
}

/// A full SCAN iteration, cursor 0 back to cursor 0, with `options` (MATCH, COUNT,
/// TYPE…): `each` gets every call's keys, and the connection to act on before the next
/// call. Returns the number of calls, or the first error reply.
///
/// # Panics
/// When a reply is neither a SCAN reply nor an error, or when the cursor has not come
/// back to 0 after 200 000 calls.
pub fn scan_all<S: AsRef<[u8]>>(
    raw: &mut Raw,
    options: &[S],
    mut each: impl FnMut(&mut Raw, Vec<Vec<u8>>),
) -> Result<usize, Vec<u8>> {
    let mut cursor = 0u64;
    for calls in 1..=200_000 {
        let mut c = cmd(&["SCAN", &cursor.to_string()]);
        c.extend(options.iter().map(|o| o.as_ref().to_vec()));
        let reply = call(raw, &c);
        if reply.starts_with(b"-") {
            return Err(reply);
        }
        let (next, keys) = crate::reply::scan_reply(&reply);
        each(raw, keys);
        if next == 0 {
            return Ok(calls);
        }
        cursor = next;
    }
    let options: Vec<Vec<u8>> = options.iter().map(|o| o.as_ref().to_vec()).collect();
    panic!("SCAN {} did not come back to cursor 0", show_cmd(&options));
}

/// A command, readably.
pub fn show_cmd(c: &[Vec<u8>]) -> String {
    c.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

/// Bytes as text for failure messages: control and non-ASCII bytes escaped, long ones cut
/// short.
pub fn brief(bytes: &[u8]) -> String {
    /// Bytes shown of an argument.
    const SHOWN: usize = 100;
    let mut out: String = bytes
        .iter()
        .take(SHOWN)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if bytes.len() > SHOWN {
        out.push_str(&format!("…({} bytes)", bytes.len()));
    }
    out
}

/// A command as text for failure messages, each word as [`brief`] shows it.
pub fn brief_cmd(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| brief(a)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_become_commands() {
        let keys = ["a".to_string(), "b".to_string()];
        let text = "
            # a comment
            SET K1 \"x y\\r\\n\\x00\"

            MGET K0 K1 K10x
        ";
        assert_eq!(
            script_commands(text, &keys),
            vec![
                cmd(&[&b"SET"[..], b"b", b"x y\r\n\0"]),
                cmd(&["MGET", "a", "b", "K10x"])
            ]
        );
    }
}
