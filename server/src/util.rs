//! Small helpers shared by command families.

/// Puts back a list a loop took (`mem::take`) and emptied, so that its capacity serves
/// the next round instead of being allocated again — unless the loop queued new entries
/// meanwhile, which stay.
pub fn reuse<T>(list: &mut Vec<T>, mut emptied: Vec<T>) {
    if list.is_empty() {
        emptied.clear();
        *list = emptied;
    }
}

/// Resident set size of the process in bytes, from /proc.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Redis's glob matching (`stringmatchlen` in `util.c`), for KEYS, SCAN MATCH and
/// CONFIG GET: `*`, `?`, `[abc]`, `[^a-z]`, and `\` escapes, with its exact corner cases
/// (a range may be given backwards, an unterminated class matches what it has seen, and
/// bytes compare as C's signed `char`).
///
/// # Examples
/// ```
/// use goblin_server::util::glob_match;
/// assert!(glob_match(b"user:*", b"user:42", false));
/// assert!(glob_match(b"h[ae]llo", b"hallo", false));
/// assert!(!glob_match(b"h[^e]llo", b"hello", false));
/// assert!(glob_match(b"H?LLO", b"hello", true));
/// ```
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    glob_impl(pattern, string, nocase, &mut skip_longer, 0)
}

/// Recursion bound against abusive patterns, as in Redis.
const GLOB_MAX_NESTING: usize = 1000;

fn fold(c: u8, nocase: bool) -> u8 {
    if nocase { c.to_ascii_lowercase() } else { c }
}

fn glob_impl(pat: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > GLOB_MAX_NESTING {
        return false;
    }
    // Reading past the end gives 0, as reading the C string's terminator does.
    let at = |b: &[u8], i: usize| b.get(i).copied().unwrap_or(0);
    let (mut p, mut si) = (0usize, 0usize);
    while p < pat.len() && si < s.len() {
        match pat[p] {
            b'*' => {
                while p + 1 < pat.len() && pat[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                while si < s.len() {
                    if glob_impl(&pat[p + 1..], &s[si..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    si += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => si += 1,
            b'[' => {
                p += 1;
                let negate = at(pat, p) == b'^';
                if negate {
                    p += 1;
                }
                let mut matched = false;
                let c = s[si];
                loop {
                    let remaining = pat.len().saturating_sub(p);
                    if at(pat, p) == b'\\' && remaining >= 2 {
                        p += 1;
                        if pat[p] == c {
                            matched = true;
                        }
                    } else if at(pat, p) == b']' {
                        break;
                    } else if remaining == 0 {
                        p -= 1;
                        break;
                    } else if remaining >= 3 && pat[p + 1] == b'-' {
                        // C compares these as (signed) chars.
                        let (mut start, mut end) = (pat[p] as i8 as i32, pat[p + 2] as i8 as i32);
                        let mut ch = c as i8 as i32;
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = (start as u8).to_ascii_lowercase() as i8 as i32;
                            end = (end as u8).to_ascii_lowercase() as i8 as i32;
                            ch = c.to_ascii_lowercase() as i8 as i32;
                        }
                        p += 2;
                        if ch >= start && ch <= end {
                            matched = true;
                        }
                    } else if fold(pat[p], nocase) == fold(c, nocase) {
                        matched = true;
                    }
                    p += 1;
                }
                if negate {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                si += 1;
            }
            other => {
                let lit = if other == b'\\' && pat.len() - p >= 2 {
                    p += 1;
                    pat[p]
                } else {
                    other
                };
                if fold(lit, nocase) != fold(s[si], nocase) {
                    return false;
                }
                si += 1;
            }
        }
        p += 1;
        if si == s.len() {
            while at(pat, p) == b'*' {
                p += 1;
            }
            break;
        }
    }
    p >= pat.len() && si == s.len()
}

/// An I/O error as C's `strerror` says it (what redis-server's MISCONF shows): Rust's
/// text without its ` (os error N)`.
pub fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

/// Bytes quoted as redis-server's `sdscatrepr` writes them (MONITOR, the log): in double
/// quotes, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` escaped and other unprintable bytes
/// as `\xhh`.
pub fn repr(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    repr_into(&mut out, bytes);
    out
}

/// Whether `bytes` must be quoted to be read back as one word (redis-server's
/// `sdsneedsrepr`): a space, a quote, a backslash or an unprintable byte.
pub fn needs_repr(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .any(|&b| !b.is_ascii_graphic() || b == b'"' || b == b'\\')
}

/// [`repr`], appended to `out`.
pub fn repr_into(out: &mut String, bytes: &[u8]) {
    use std::fmt::Write as _;
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_glob_cases() {
        let yes: &[(&[u8], &[u8])] = &[
            (b"*", b"anything"),
            (b"a*", b"a"),
            (b"a*b*c", b"aXXbYYc"),
            (b"h?llo", b"hello"),
            (b"h[ae]llo", b"hello"),
            (b"h[a-e]llo", b"hdllo"),
            (b"h[e-a]llo", b"hdllo"),
            (b"h[^a]llo", b"hello"),
            (b"h\\*llo", b"h*llo"),
            (b"[\\]]", b"]"),
            (b"a[bc", b"ab"),
            (b"***", b"x"),
            (b"a**", b"a"),
        ];
        for (p, s) in yes {
            assert!(
                glob_match(p, s, false),
                "{:?} ~ {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(s)
            );
        }
        let no: &[(&[u8], &[u8])] = &[
            (b"", b"a"),
            // Redis's matcher needs a byte to start; KEYS and SCAN special-case a lone `*`.
            (b"*", b""),
            (b"a", b""),
            (b"h?llo", b"hllo"),
            (b"h[^e]llo", b"hello"),
            (b"a*b", b"acd"),
            (b"abc", b"ABC"),
        ];
        for (p, s) in no {
            assert!(
                !glob_match(p, s, false),
                "{:?} !~ {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(s)
            );
        }
        assert!(glob_match(b"ABC", b"abc", true));
        assert!(glob_match(b"", b"", false));
    }

    #[test]
    fn pathological_patterns_finish() {
        let pat = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let s = [b'a'; 200];
        assert!(!glob_match(pat, &s, false));
    }
}

thread_local! {
    static RNG: std::cell::Cell<u64> = std::cell::Cell::new(seed());
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS once per thread; mix in the time for variety.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() | 1
}

/// A fast per-thread pseudo-random number (xorshift64*), for RANDOMKEY and sampling;
/// not for anything that needs to be unpredictable.
pub fn random_u64() -> u64 {
    RNG.with(|cell| {
        let mut x = cell.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        cell.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}
