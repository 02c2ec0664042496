//! Numbers as `lua_cjson.c` writes and reads them (its `fpconv.c`, with a '.' decimal
//! point): C's `printf("%.<p>g")` and glibc's `strtod`.

/// `printf("%.{precision}g", n)` as glibc writes it (`precision` from 1 to 17).
pub fn fmt_g(out: &mut Vec<u8>, n: f64, precision: usize) {
    let precision = precision.max(1);
    if n.is_nan() {
        out.extend_from_slice(if n.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if n.is_infinite() {
        out.extend_from_slice(if n < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if n == 0.0 {
        out.extend_from_slice(if n.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // The exponent after rounding to `precision` significant digits.
    let sci = format!("{:.*e}", precision - 1, n);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    if exp < -4 || exp >= precision as i32 {
        out.extend_from_slice(strip_zeros(mantissa).as_bytes());
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        let fixed = format!("{n:.decimals$}");
        out.extend_from_slice(strip_zeros(&fixed).as_bytes());
    }
}

/// A number written with a decimal point, without its trailing zeros (and without the
/// point if nothing follows it), as `%g` writes it.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// glibc's `strtod` on `data[at..]` (bytes past the end read as NUL, as in the C string):
/// the number and where it ends, or `None` when no number starts there.
pub fn strtod(data: &[u8], at: usize) -> Option<(f64, usize)> {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut p = at;
    while matches!(byte(p), b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        p += 1;
    }
    let negative = byte(p) == b'-';
    if matches!(byte(p), b'+' | b'-') {
        p += 1;
    }
    let sign = |v: f64| if negative { -v } else { v };
    let lower = |i: usize| byte(i).to_ascii_lowercase();
    // inf, infinity, nan, nan(chars)
    if lower(p) == b'i' && lower(p + 1) == b'n' && lower(p + 2) == b'f' {
        let mut end = p + 3;
        if (0..5).all(|k| lower(end + k) == b"inity"[k]) {
            end += 5;
        }
        return Some((sign(f64::INFINITY), end));
    }
    if lower(p) == b'n' && lower(p + 1) == b'a' && lower(p + 2) == b'n' {
        let mut end = p + 3;
        if byte(end) == b'(' {
            let mut q = end + 1;
            while byte(q).is_ascii_alphanumeric() || byte(q) == b'_' {
                q += 1;
            }
            if byte(q) == b')' {
                end = q + 1;
            }
        }
        return Some((sign(f64::NAN), end));
    }
    if byte(p) == b'0' && lower(p + 1) == b'x' {
        let q = p + 2;
        let starts =
            byte(q).is_ascii_hexdigit() || (byte(q) == b'.' && byte(q + 1).is_ascii_hexdigit());
        if starts {
            let (v, end) = hex(data, q);
            return Some((sign(v), end));
        }
        // "0x" without digits: the number is the 0.
        return Some((sign(0.0), p + 1));
    }
    // Decimal.
    let start = p;
    let mut digits = 0;
    while byte(p).is_ascii_digit() {
        p += 1;
        digits += 1;
    }
    if byte(p) == b'.' {
        p += 1;
        while byte(p).is_ascii_digit() {
            p += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(byte(p), b'e' | b'E') {
        let mut q = p + 1;
        if matches!(byte(q), b'+' | b'-') {
            q += 1;
        }
        if byte(q).is_ascii_digit() {
            while byte(q).is_ascii_digit() {
                q += 1;
            }
            p = q;
        }
    }
    let text = std::str::from_utf8(&data[start..p]).ok()?;
    let v = decimal(text);
    Some((sign(v), p))
}

/// A decimal number's text (digits, point, exponent) as the nearest double; exponents
/// too large for Rust's parser are reduced first, keeping the result.
fn decimal(text: &str) -> f64 {
    if let Ok(v) = text.parse::<f64>() {
        return v;
    }
    // An exponent beyond i64 (which Rust's parser may refuse): the value is 0 or infinite,
    // unless the mantissa is 0.
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, "0"),
    };
    let zero = !mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if zero || exp.starts_with('-') {
        0.0
    } else {
        f64::INFINITY
    }
}

/// A hexadecimal floating-point number's digits from `data[at..]` (after `0x`), rounded
/// to nearest even as glibc does: the value and where the number ends.
fn hex(data: &[u8], at: usize) -> (f64, usize) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut p = at;
    let mut mant: u64 = 0;
    let mut exp: i64 = 0; // value = mant * 2^exp (before the sticky bits)
    let mut sticky = false;
    let mut seen_point = false;
    loop {
        let c = byte(p);
        if c == b'.' && !seen_point {
            seen_point = true;
            p += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        if mant >> 60 == 0 {
            mant = mant << 4 | u64::from(d);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        p += 1;
    }
    if matches!(byte(p), b'p' | b'P') {
        let mut q = p + 1;
        let neg = byte(q) == b'-';
        if matches!(byte(q), b'+' | b'-') {
            q += 1;
        }
        if byte(q).is_ascii_digit() {
            let mut e: i64 = 0;
            while byte(q).is_ascii_digit() {
                e = (e * 10 + i64::from(byte(q) - b'0')).min(1 << 40);
                q += 1;
            }
            exp += if neg { -e } else { e };
            p = q;
        }
    }
    (scale(mant, exp, sticky), p)
}

/// `mant * 2^exp` (plus a little more when `sticky`) rounded to the nearest double, ties
/// to even.
fn scale(mant: u64, exp: i64, sticky: bool) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    // Normalise: the top bit of `m` set; value = m * 2^e.
    let shift = mant.leading_zeros();
    let m = mant << shift;
    let e = exp - i64::from(shift);
    // The value is in [2^(e+63), 2^(e+64)): its binary exponent is e + 63.
    let top = e + 63;
    if top > 1023 {
        return f64::INFINITY;
    }
    // Bits kept: 53 for normal numbers, fewer for subnormal ones.
    let keep: i64 = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep <= 0 {
        // Below half the smallest subnormal, or exactly half of it (ties to even: 0).
        if keep == 0 {
            let half = m == 1 << 63 && !sticky;
            return if half { 0.0 } else { f64::from_bits(1) };
        }
        return 0.0;
    }
    let drop = 64 - keep as u32;
    let mut kept = m >> drop;
    let rest = m & ((1u64 << drop) - 1);
    let halfway = 1u64 << (drop - 1);
    let round_up = rest > halfway || (rest == halfway && (sticky || kept & 1 == 1));
    let mut top = top;
    if round_up {
        kept += 1;
        if kept >> keep == 1 {
            kept >>= 1;
            top += 1;
            if top > 1023 {
                return f64::INFINITY;
            }
        }
    }
    // kept has `keep` bits; its value is kept * 2^(top - keep + 1).
    let lsb_exp = top - keep + 1;
    kept as f64 * pow2(lsb_exp)
}

/// 2^e for the exponents [`scale`] needs, exactly (in two steps below 2^-1022).
fn pow2(e: i64) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        pow2(e + 64) * f64::from_bits(((1023 - 64) as u64) << 52)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(n: f64, p: usize) -> String {
        let mut out = Vec::new();
        fmt_g(&mut out, n, p);
        String::from_utf8(out).expect("ASCII")
    }

    /// What glibc's printf writes (checked with C's `printf("%.14g")`).
    #[test]
    fn percent_g_matches_printf() {
        assert_eq!(g(1.5, 14), "1.5");
        assert_eq!(g(-0.0, 14), "-0");
        assert_eq!(g(1e300, 14), "1e+300");
        assert_eq!(g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(g(0.1, 14), "0.1");
        assert_eq!(g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(g(9007199254740992.0, 14), "9.007199254741e+15");
        assert_eq!(g(-(2f64.powi(63)), 14), "-9.2233720368548e+18");
        assert_eq!(g(1e-5, 14), "1e-05");
        assert_eq!(g(1e15, 14), "1e+15");
        assert_eq!(g(0.0001, 14), "0.0001");
        assert_eq!(g(100.0, 14), "100");
        assert_eq!(g(2.5, 1), "2");
        assert_eq!(g(3.5, 1), "4");
        assert_eq!(g(0.125, 2), "0.12");
        assert_eq!(g(1e-300, 14), "1e-300");
        assert_eq!(g(5e-324, 14), "4.9406564584125e-324");
        assert_eq!(g(f64::INFINITY, 14), "inf");
        assert_eq!(g(f64::NEG_INFINITY, 14), "-inf");
    }

    #[test]
    fn strtod_reads_what_glibc_reads() {
        let r = |s: &str| strtod(s.as_bytes(), 0);
        assert_eq!(r("12abc"), Some((12.0, 2)));
        assert_eq!(r("-1.5e3,"), Some((-1500.0, 6)));
        assert_eq!(r("1e"), Some((1.0, 1)));
        assert_eq!(r("1e+"), Some((1.0, 1)));
        assert_eq!(r("."), None);
        assert_eq!(r("-"), None);
        assert_eq!(r("0x10"), Some((16.0, 4)));
        assert_eq!(r("0x"), Some((0.0, 1)));
        assert_eq!(r("0x1p-2"), Some((0.25, 6)));
        assert_eq!(r("0x1.8p1"), Some((3.0, 7)));
        assert_eq!(r("infinity"), Some((f64::INFINITY, 8)));
        assert_eq!(r("-Inf"), Some((f64::NEG_INFINITY, 4)));
        assert_eq!(r("1e999"), Some((f64::INFINITY, 5)));
        assert_eq!(r("1e-999"), Some((0.0, 6)));
        let (nan, end) = r("nan(123)x").expect("a number");
        assert!(nan.is_nan());
        assert_eq!(end, 8);
        assert_eq!(r("0x1fffffffffffff"), Some((9007199254740991.0, 16)));
        assert_eq!(r("0x20000000000001"), Some((9007199254740992.0, 16)));
        assert_eq!(r("0x20000000000003"), Some((9007199254740996.0, 16)));
        assert_eq!(r("0x1p-1074"), Some((f64::from_bits(1), 9)));
    }
}
