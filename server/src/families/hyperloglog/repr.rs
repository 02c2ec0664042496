//! The HyperLogLog representation of redis-server 7.0 (`hyperloglog.c`), on a string's
//! bytes, so that a value made by one server is the same bytes, and counts the same, on
//! the other:
//!
//! ```text
//! "HYLL" | encoding (0 dense, 1 sparse) | 3 unused | cached cardinality (8 bytes, LE)
//! ```
//!
//! followed by the registers: 16384 of 6 bits each, packed from the least significant bit
//! of each byte (dense, 12288 bytes), or a run-length code of them (sparse: `ZERO` and
//! `XZERO` runs of empty registers, `VAL` runs of registers holding 1 to 32). The most
//! significant bit of the cache's last byte set means the cache is stale.
//!
//! Sparse values are changed exactly as Redis changes them (`hllSparseSet`: the same
//! splits, the same merges of neighbouring runs, promotion to dense past
//! `hll-sparse-max-bytes` or for a register above 32), since the same sequence of changes
//! must leave the same bytes. Nothing here trusts the bytes it reads: a value that is not
//! a valid sparse code is [`Corrupt`], never a panic or an out-of-bounds access.
//!
//! One corner is Redis's own accident, imitated only within a command: a sparse value
//! whose last opcode is an `XZERO` cut after its first byte reads its second byte past
//! the end of the string — the terminator Redis keeps there, 0 (here too), or, after a
//! change that wrote there in the same command, that byte (kept as `Hll`'s tail). Between
//! commands Goblin stores only the string, so that hidden byte reads 0 again.

/// Bytes of the header: magic, encoding, three unused bytes, the cached cardinality.
pub const HDR_SIZE: usize = 16;
/// Where the cached cardinality starts in the header.
const CARD: usize = 8;
/// Bits of the hash that choose the register (Redis's `HLL_P`).
const P: u32 = 14;
/// Bits of the hash left to count the run of zeros in (`HLL_Q`).
const Q: usize = 64 - P as usize;
/// Registers (`HLL_REGISTERS`).
pub const REGISTERS: usize = 1 << P;
/// Bits per dense register.
const BITS: usize = 6;
/// A dense register's mask.
const REGISTER_MAX: u32 = (1 << BITS) - 1;
/// Length of a dense value: header and packed registers.
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
/// The dense encoding.
pub const DENSE: u8 = 0;
/// The sparse encoding.
pub const SPARSE: u8 = 1;
/// Largest register value a sparse `VAL` opcode holds.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// Longest run of one `VAL` opcode.
const SPARSE_VAL_MAX_LEN: usize = 4;
/// Longest run of one `ZERO` opcode.
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// Longest run of one `XZERO` opcode.
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln 2, the estimator's constant for the limit of many registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7; // 0.721347520444481703680 in Redis: the same double.
/// The seed of Redis's MurmurHash64A for HyperLogLog elements.
const SEED: u64 = 0xadc8_3b19;

/// A value that claims to be a HyperLogLog but whose registers cannot be read (Redis's
/// `INVALIDOBJ`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// Whether `s` is a HyperLogLog as `isHLLObjectOrReply` checks one: long enough for the
/// header, the magic, a known encoding, and a dense value of the exact length.
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR_SIZE
        && s.starts_with(b"HYLL")
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The encoding byte of a checked value ([`is_hll`]).
pub fn encoding(s: &[u8]) -> u8 {
    s.get(4).copied().unwrap_or(DENSE)
}

/// The cached cardinality, if it is valid.
pub fn cached(s: &[u8]) -> Option<u64> {
    let card: [u8; 8] = s.get(CARD..HDR_SIZE)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// Stores `card` as the cached cardinality (valid: a count never reaches 2^63).
pub fn set_cached(s: &mut [u8], card: u64) {
    if let Some(bytes) = s.get_mut(CARD..HDR_SIZE) {
        bytes.copy_from_slice(&card.to_le_bytes());
    }
}

/// Marks the cached cardinality stale (the other bytes stay as they are, as in Redis).
pub fn invalidate(s: &mut [u8]) {
    if let Some(b) = s.get_mut(HDR_SIZE - 1) {
        *b |= 0x80;
    }
}

/// An empty HyperLogLog as PFADD and PFMERGE create it: sparse, one `XZERO` covering
/// every register, the cache zero (and valid).
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR_SIZE + 2);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.resize(HDR_SIZE, 0);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        s.extend_from_slice(&xzero(run));
        left -= run;
    }
    s
}

/// MurmurHash64A, as Redis computes it (endian-neutral: words are read little-endian).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let mut k = u64::from_le_bytes(bytes).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in, and the length of the `00…1` pattern its hash
/// shows from bit 14 on (1 to 51) — `hllPatLen`.
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // A bit set past the 50 counted ones ends every run.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Dense register `i` of the packed registers `r` (a byte past the end reads 0).
fn dense_get(r: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * BITS / 8, (i * BITS) & 7);
    let b0 = u32::from(r.get(byte).copied().unwrap_or(0));
    let b1 = u32::from(r.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

/// Sets dense register `i` of `r` to `val` (0 to 63).
fn dense_put(r: &mut [u8], i: usize, val: u8) {
    let (byte, fb) = (i * BITS / 8, (i * BITS) & 7);
    let v = u32::from(val);
    if let Some(b) = r.get_mut(byte) {
        *b &= !(REGISTER_MAX << fb) as u8;
        *b |= (v << fb) as u8;
    }
    if let Some(b) = r.get_mut(byte + 1) {
        *b &= !(REGISTER_MAX >> (8 - fb)) as u8;
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Raises dense register `i` to `count` if it is lower; whether it changed
/// (`hllDenseSet`).
fn dense_raise(r: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(r, i) {
        dense_put(r, i, count);
        true
    } else {
        false
    }
}

/// A sparse opcode: its kind and the registers it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `00llllll`: 1 to 64 empty registers.
    Zero(usize),
    /// `01llllll llllllll`: 1 to 16384 empty registers.
    XZero(usize),
    /// `1vvvvvll`: 1 to 4 registers holding 1 to 32.
    Val(u8, usize),
}

impl Op {
    /// Registers covered.
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    /// Bytes taken.
    fn size(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

/// The opcode whose first byte is `b` and whose next byte (for an `XZERO`) is `b1`.
fn op(b: u8, b1: u8) -> Op {
    match b & 0xc0 {
        0x00 => Op::Zero(usize::from(b & 0x3f) + 1),
        0x40 => Op::XZero(((usize::from(b & 0x3f) << 8) | usize::from(b1)) + 1),
        _ => val_of(b),
    }
}

/// A `VAL` opcode's value and run.
fn val_of(b: u8) -> Op {
    Op::Val(((b >> 2) & 0x1f) + 1, usize::from(b & 0x3) + 1)
}

/// A `VAL` opcode (value 1 to 32, run 1 to 4).
fn val(value: u8, len: usize) -> u8 {
    0x80 | ((value.wrapping_sub(1) & 0x1f) << 2) | ((len.wrapping_sub(1) & 0x3) as u8)
}

/// A `ZERO` opcode (run 1 to 64).
fn zero(len: usize) -> u8 {
    (len.wrapping_sub(1) & 0x3f) as u8
}

/// An `XZERO` opcode (run 1 to 16384).
fn xzero(len: usize) -> [u8; 2] {
    let l = len.wrapping_sub(1);
    [0x40 | ((l >> 8) & 0x3f) as u8, (l & 0xff) as u8]
}

/// The opcodes of a stored sparse value's code, in order (past the end, bytes read 0).
fn ops(s: &[u8]) -> impl Iterator<Item = Op> + '_ {
    ops_with_tail(s, 0)
}

/// The opcodes of a sparse value's code, the byte just past the end reading `tail`.
fn ops_with_tail(s: &[u8], tail: u8) -> impl Iterator<Item = Op> + '_ {
    let mut p = HDR_SIZE;
    std::iter::from_fn(move || {
        let b = *s.get(p)?;
        let b1 = s.get(p + 1).copied().unwrap_or(tail);
        let o = op(b, b1);
        p += o.size();
        Some(o)
    })
}

/// The dense form of a sparse value, its header copied (`hllSparseToDense`); `Corrupt`
/// unless its opcodes cover exactly the 16384 registers. (Any run past the last register
/// is refused, as redis-server's fix of CVE-2025-32023 refuses it: the original 7.0.15
/// stopped at a `VAL` run past the end and accepted what it had read.)
fn sparse_to_dense(s: &[u8], tail: u8) -> Result<Vec<u8>, Corrupt> {
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR_SIZE].copy_from_slice(s.get(..HDR_SIZE).ok_or(Corrupt)?);
    d[4] = DENSE;
    let regs = &mut d[HDR_SIZE..];
    let mut idx = 0usize;
    for o in ops_with_tail(s, tail) {
        if idx + o.span() > REGISTERS {
            return Err(Corrupt);
        }
        if let Op::Val(v, n) = o {
            for i in idx..idx + n {
                dense_put(regs, i, v);
            }
        }
        idx += o.span();
    }
    if idx == REGISTERS {
        Ok(d)
    } else {
        Err(Corrupt)
    }
}

/// The dense form of a checked value (a dense one as it is); `Corrupt` for a sparse code
/// that does not cover the registers.
pub fn to_dense(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    if encoding(s) == DENSE {
        Ok(s.to_vec())
    } else {
        sparse_to_dense(s, 0)
    }
}

/// Every register of a dense value, in order.
pub fn dense_registers(s: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let r = s.get(HDR_SIZE..).unwrap_or_default();
    (0..REGISTERS).map(move |i| dense_get(r, i))
}

/// How many registers hold each value (0 to 63).
pub type Histogram = [u64; 64];

/// The registers' histogram of a checked value; `Corrupt` for a sparse code that does not
/// cover exactly the registers (`hllDenseRegHisto`, `hllSparseRegHisto`).
pub fn histogram(s: &[u8]) -> Result<Histogram, Corrupt> {
    let mut h = [0u64; 64];
    if encoding(s) == DENSE {
        // Four registers in every three bytes.
        for c in s.get(HDR_SIZE..).unwrap_or_default().chunks_exact(3) {
            let (b0, b1, b2) = (c[0], c[1], c[2]);
            h[usize::from(b0 & 63)] += 1;
            h[usize::from((b0 >> 6 | b1 << 2) & 63)] += 1;
            h[usize::from((b1 >> 4 | b2 << 4) & 63)] += 1;
            h[usize::from(b2 >> 2)] += 1;
        }
        return Ok(h);
    }
    let mut idx = 0usize;
    for o in ops(s) {
        match o {
            Op::Zero(n) | Op::XZero(n) => h[0] += n as u64,
            Op::Val(v, n) => h[usize::from(v)] += n as u64,
        }
        idx = idx.saturating_add(o.span());
    }
    if idx == REGISTERS {
        Ok(h)
    } else {
        Err(Corrupt)
    }
}

/// The histogram of registers held one per byte (PFCOUNT's merge of several keys).
pub fn raw_histogram(max: &[u8]) -> Histogram {
    let mut h = [0u64; 64];
    for &r in max {
        h[usize::from(r & 63)] += 1;
    }
    h
}

/// Ertl's σ ("New cardinality estimation algorithms for HyperLogLog sketches").
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

/// Ertl's τ.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        // Redis writes pow(1 - x, 2), which its compiler makes this product.
        z -= (1.0 - x) * (1.0 - x) * y;
        if before == z {
            return z / 3.0;
        }
    }
}

/// The cardinality the registers' histogram estimates (`hllCount`: Ertl's improved
/// estimator, in Redis's order of floating-point operations).
pub fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// Raises each of `max` (one register per byte) to the value's register where that is
/// higher (`hllMerge`); `Corrupt` for a sparse code that does not cover exactly the
/// registers (any run past the last one included, as in [`to_dense`]).
pub fn merge(max: &mut [u8], s: &[u8]) -> Result<(), Corrupt> {
    if encoding(s) == DENSE {
        let r = s.get(HDR_SIZE..).unwrap_or_default();
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense_get(r, i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    for o in ops(s) {
        if i + o.span() > REGISTERS {
            return Err(Corrupt);
        }
        if let Op::Val(v, n) = o {
            for m in max.iter_mut().skip(i).take(n) {
                *m = (*m).max(v);
            }
        }
        i += o.span();
    }
    if i == REGISTERS { Ok(()) } else { Err(Corrupt) }
}

/// PFDEBUG DECODE's text of a sparse value: `z:<run>`, `Z:<run>`, `v:<value>,<run>`,
/// separated by spaces.
pub fn decode(s: &[u8]) -> String {
    let mut out = String::new();
    for o in ops(s) {
        if !out.is_empty() {
            out.push(' ');
        }
        let item = match o {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(v, n) => format!("v:{v},{n}"),
        };
        out.push_str(&item);
    }
    out
}

/// A HyperLogLog being changed in place: `s` is the whole value; `tail` is the byte
/// just past its end, which Redis's sparse code may read (see the module's note).
pub struct Hll<'a> {
    s: &'a mut Vec<u8>,
    tail: u8,
    max_bytes: usize,
}

impl<'a> Hll<'a> {
    /// Changes `s`, a checked value; a sparse one becomes dense once it would grow past
    /// `max_bytes`.
    pub fn new(s: &'a mut Vec<u8>, max_bytes: usize) -> Hll<'a> {
        Hll {
            s,
            tail: 0,
            max_bytes,
        }
    }

    /// Adds an element (`hllAdd`): whether a register changed.
    ///
    /// # Errors
    /// A sparse code that does not cover the register, or cannot become dense.
    pub fn add(&mut self, ele: &[u8]) -> Result<bool, Corrupt> {
        let (index, count) = pattern(ele);
        self.raise(index, count)
    }

    /// Raises register `index` to `count` if it is lower: whether it changed.
    ///
    /// # Errors
    /// As [`Hll::add`].
    pub fn raise(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        match encoding(self.s) {
            DENSE => Ok(dense_raise(
                self.s.get_mut(HDR_SIZE..).unwrap_or_default(),
                index,
                count,
            )),
            SPARSE => self.sparse_raise(index, count),
            _ => Err(Corrupt),
        }
    }

    /// Makes the value dense (the header kept, the cache too).
    ///
    /// # Errors
    /// A sparse code that does not cover the registers: nothing changes.
    pub fn make_dense(&mut self) -> Result<(), Corrupt> {
        if encoding(self.s) == SPARSE {
            *self.s = sparse_to_dense(self.s, self.tail)?;
            self.tail = 0;
        }
        Ok(())
    }

    /// The byte at `i` of the value, or its tail just past the end.
    fn at(&self, i: usize) -> u8 {
        self.s
            .get(i)
            .copied()
            .unwrap_or(if i == self.s.len() { self.tail } else { 0 })
    }

    /// Writes the byte at `i`, or the tail just past the end.
    fn put(&mut self, i: usize, b: u8) {
        let len = self.s.len();
        match self.s.get_mut(i) {
            Some(x) => *x = b,
            None if i == len => self.tail = b,
            None => {}
        }
    }

    /// The opcode at `p`.
    fn op_at(&self, p: usize) -> Op {
        op(self.at(p), self.at(p + 1))
    }

    /// Promotes to dense, then raises the register (the change that did not fit the
    /// sparse code).
    fn promote(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        self.make_dense()?;
        dense_raise(self.s.get_mut(HDR_SIZE..).unwrap_or_default(), index, count);
        Ok(true)
    }

    /// `hllSparseSet`: finds the opcode covering `index`; if the register must rise,
    /// replaces the opcode with the sequence that splits it around the register, then
    /// merges neighbouring `VAL` runs of equal value.
    fn sparse_raise(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        if count > SPARSE_VAL_MAX_VALUE {
            return self.promote(index, count);
        }
        // Step 1: the opcode covering the register.
        let end = self.s.len();
        let (mut p, mut first, mut span) = (HDR_SIZE, 0usize, 0usize);
        let mut prev = None;
        while p < end {
            let o = self.op_at(p);
            span = o.span();
            if index < first + span {
                break;
            }
            prev = Some(p);
            p += o.size();
            first += span;
        }
        if span == 0 || p >= end {
            return Err(Corrupt);
        }
        let current = self.op_at(p);
        let next = Some(p + current.size()).filter(|&n| n < end);
        let runlen = current.span();
        // Step 2: what replaces it.
        match current {
            Op::Val(old, _) if old >= count => return Ok(false),
            Op::Val(_, 1) | Op::Zero(1) => {
                self.put(p, val(count, 1));
                return Ok(self.merge_runs(prev));
            }
            _ => {}
        }
        let last = first + runlen - 1;
        let mut seq = [0u8; 5];
        let mut n = 0;
        let mut push = |bytes: &[u8]| {
            seq[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        };
        // A run of empty registers: ZERO when it fits, else XZERO.
        let zeros = |len: usize| -> ([u8; 2], usize) {
            if len > SPARSE_ZERO_MAX_LEN {
                (xzero(len), 2)
            } else {
                ([zero(len), 0], 1)
            }
        };
        match current {
            Op::Val(value, _) => {
                if index != first {
                    push(&[val(value, index - first)]);
                }
                push(&[val(count, 1)]);
                if index != last {
                    push(&[val(value, last - index)]);
                }
            }
            Op::Zero(_) | Op::XZero(_) => {
                if index != first {
                    let (run, k) = zeros(index - first);
                    push(&run[..k]);
                }
                push(&[val(count, 1)]);
                if index != last {
                    let (run, k) = zeros(last - index);
                    push(&run[..k]);
                }
            }
        }
        // Step 3: the sequence in place of the opcode, what follows moved as needed.
        let old_len = current.size();
        if n > old_len && end + (n - old_len) > self.max_bytes {
            return self.promote(index, count);
        }
        if n > old_len {
            let grow = n - old_len;
            self.s.resize(end + grow, 0);
            self.s[end] = self.tail;
            if let Some(next) = next {
                self.s.copy_within(next..end, next + grow);
            }
        } else if n < old_len {
            let shrink = old_len - n;
            if let Some(next) = next {
                self.s.copy_within(next..end, next - shrink);
            }
            self.s.truncate(end - shrink);
        }
        // Redis's length update writes the terminator, which the copy may then overwrite.
        self.tail = 0;
        for (i, &b) in seq[..n].iter().enumerate() {
            self.put(p + i, b);
        }
        Ok(self.merge_runs(prev))
    }

    /// Step 4 of `hllSparseSet`: from the opcode before the change, up to five opcodes
    /// on, merges neighbouring `VAL` opcodes of equal value whose runs fit one; then marks
    /// the cache stale. Always `true` (the register changed).
    fn merge_runs(&mut self, prev: Option<usize>) -> bool {
        let mut p = prev.unwrap_or(HDR_SIZE);
        let mut scans = 5;
        while p < self.s.len() && scans > 0 {
            scans -= 1;
            let b = self.s[p];
            match b & 0xc0 {
                0x40 => p += 2,
                0x00 => p += 1,
                _ => {
                    if let Some(&b1) = self.s.get(p + 1)
                        && b1 & 0x80 != 0
                        && let (Op::Val(v1, n1), Op::Val(v2, n2)) = (val_of(b), val_of(b1))
                        && v1 == v2
                        && n1 + n2 <= SPARSE_VAL_MAX_LEN
                    {
                        self.s[p + 1] = val(v1, n1 + n2);
                        self.s.remove(p);
                        self.tail = 0;
                        continue;
                    }
                    p += 1;
                }
            }
        }
        invalidate(self.s);
        true
    }
}

/// Register-access rounds PFSELFTEST runs (Redis runs 1000; each is 16384 registers set
/// and read back).
const SELFTEST_ROUNDS: usize = 20;
/// Elements PFSELFTEST adds (Redis adds ten million, seconds of a thread's time; the
/// checkpoints up to this one cover both encodings and the promotion between them).
const SELFTEST_ELEMENTS: u64 = 100_000;
/// The largest sparse value PFSELFTEST grows (the default `hll-sparse-max-bytes`).
const SELFTEST_MAX_SPARSE_BYTES: usize = 3000;

/// PFSELFTEST: dense registers keep what is set in them without touching their
/// neighbours; a sparse and a dense HyperLogLog fed the same elements agree, the sparse one
/// stays sparse while small, and the estimates stay within six standard errors. The
/// failure's message is Redis's.
///
/// # Errors
/// `TESTFAILED …`, as Redis words it.
pub fn selftest(seed: u64, max_bytes: usize) -> Result<(), String> {
    // A threshold set very high would keep the sparse value sparse for every element,
    // each addition walking all of it: the test checks the code, not the setting.
    let max_bytes = max_bytes.min(SELFTEST_MAX_SPARSE_BYTES);
    let mut state = seed | 1;
    let mut random = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut dense = vec![0u8; DENSE_SIZE];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..SELFTEST_ROUNDS {
        let regs = &mut dense[HDR_SIZE..];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (random() & u64::from(REGISTER_MAX)) as u8;
            dense_put(regs, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(regs, i);
            if got != b {
                return Err(format!(
                    "TESTFAILED Register {i} should be {b} but is {got}"
                ));
            }
        }
    }
    dense.fill(0);
    dense[..4].copy_from_slice(b"HYLL");
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    let salt = random();
    for j in 1..=SELFTEST_ELEMENTS {
        let ele = (j ^ salt).to_le_bytes();
        let (index, count) = pattern(&ele);
        dense_raise(&mut dense[HDR_SIZE..], index, count);
        // A fresh sparse value cannot be corrupt.
        let _ = Hll::new(&mut sparse, max_bytes).add(&ele);
        if j != checkpoint {
            continue;
        }
        if j < (max_bytes / 2) as u64 && encoding(&sparse) != SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = histogram(&dense).map(|h| estimate(&h));
        if card != histogram(&sparse).map(|h| estimate(&h)) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let card = card.unwrap_or(0);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * j as f64).ceil() as u64
        };
        let abserr = card.abs_diff(checkpoint);
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hll-sparse-max-bytes`'s default.
    const SPARSE_MAX_BYTES: usize = 3000;

    /// Registers as one byte each, from any checked value (the oracle: every register
    /// decoded on its own).
    fn registers(s: &[u8]) -> Vec<u8> {
        let mut max = vec![0u8; REGISTERS];
        merge(&mut max, s).expect("valid");
        max
    }

    /// A tiny deterministic generator.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
    }

    #[test]
    fn selftest_passes() {
        for seed in [1, 2, 0xdead_beef] {
            assert_eq!(selftest(seed, SPARSE_MAX_BYTES), Ok(()));
        }
    }

    #[test]
    fn murmur_and_pattern_match_redis() {
        // Values computed by redis-server 7.0 (PFADD then PFDEBUG GETREG / DECODE).
        let fresh = new_sparse();
        assert_eq!(fresh.len(), 18);
        assert_eq!(&fresh[16..], &[0x7f, 0xff]);
        let mut v = new_sparse();
        let mut h = Hll::new(&mut v, SPARSE_MAX_BYTES);
        for e in [&b"a"[..], b"b", b"c"] {
            assert_eq!(h.add(e), Ok(true));
        }
        assert_eq!(decode(&v), "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603");
        assert_eq!(
            &v[16..],
            &[
                0x60, 0xf3, 0x80, 0x50, 0xb1, 0x84, 0x4b, 0xfb, 0x80, 0x42, 0x5a
            ]
        );
    }

    #[test]
    fn dense_registers_round_trip_without_touching_neighbours() {
        let mut r = vec![0u8; DENSE_SIZE - HDR_SIZE];
        let mut want = vec![0u8; REGISTERS];
        let mut rng = Lcg(7);
        for _ in 0..3 {
            for (i, w) in want.iter_mut().enumerate() {
                let v = (rng.next() & 63) as u8;
                *w = v;
                dense_put(&mut r, i, v);
            }
            for (i, &w) in want.iter().enumerate() {
                assert_eq!(dense_get(&r, i), w, "register {i}");
            }
        }
    }

    #[test]
    fn sparse_and_dense_agree_as_elements_are_added() {
        let mut sparse = new_sparse();
        let mut dense = to_dense(&sparse).expect("valid");
        let mut checkpoint = 1;
        let mut promoted = None;
        for j in 1u64..=20_000 {
            let e = j.to_le_bytes();
            let a = Hll::new(&mut sparse, SPARSE_MAX_BYTES).add(&e);
            let b = Hll::new(&mut dense, SPARSE_MAX_BYTES).add(&e);
            assert_eq!(a, b, "element {j}");
            if encoding(&sparse) == DENSE && promoted.is_none() {
                promoted = Some(j);
            }
            assert!(sparse.len() <= SPARSE_MAX_BYTES || encoding(&sparse) == DENSE);
            if j == checkpoint || j % 997 == 0 {
                assert_eq!(registers(&sparse), registers(&dense), "element {j}");
                let (hs, hd) = (histogram(&sparse), histogram(&dense));
                assert_eq!(hs, hd);
                let n = estimate(&hd.expect("valid"));
                let err = (n as f64 - j as f64).abs();
                assert!(err <= (j as f64 * 0.05).max(1.0), "{j} estimated as {n}");
                if j == checkpoint {
                    checkpoint *= 10;
                }
            }
        }
        assert!(promoted.is_some_and(|j| j > 500), "{promoted:?}");
        assert_eq!(sparse, {
            // The dense value's cache was never invalidated by `add` alone.
            let mut d = dense.clone();
            d[..HDR_SIZE].copy_from_slice(&sparse[..HDR_SIZE]);
            d
        });
    }

    #[test]
    fn the_sparse_code_is_canonical_after_in_order_raises() {
        // Registers raised in index order, as PFMERGE raises them.
        let mut rng = Lcg(3);
        for _ in 0..50 {
            let mut v = new_sparse();
            let mut want = vec![0u8; REGISTERS];
            let mut h = Hll::new(&mut v, usize::MAX);
            let mut i = 0;
            while i < REGISTERS {
                let value = (rng.next() % 33) as u8;
                if value > 0 {
                    assert_eq!(h.raise(i, value), Ok(true));
                    want[i] = value;
                }
                i += 1 + (rng.next() % 80) as usize;
            }
            assert_eq!(encoding(&v), SPARSE);
            assert_eq!(registers(&v), want);
        }
    }

    #[test]
    fn a_register_above_32_or_a_code_past_the_threshold_turns_dense() {
        let mut v = new_sparse();
        let mut h = Hll::new(&mut v, SPARSE_MAX_BYTES);
        assert_eq!(h.raise(7, 3), Ok(true));
        assert_eq!(h.raise(9000, 40), Ok(true));
        assert_eq!(encoding(&v), DENSE);
        assert_eq!(v.len(), DENSE_SIZE);
        let regs = registers(&v);
        assert_eq!((regs[7], regs[9000]), (3, 40));
        assert_eq!(regs.iter().filter(|&&r| r > 0).count(), 2);
        assert_eq!(cached(&v), None);
        // A threshold of 40 bytes: the first change that would pass it promotes.
        let mut v = new_sparse();
        let mut h = Hll::new(&mut v, 40);
        let mut i = 0;
        while encoding(h.s) == SPARSE {
            assert!(h.s.len() <= 40);
            assert_eq!(h.raise(i * 97, 1), Ok(true));
            i += 1;
        }
        assert_eq!(registers(&v).iter().filter(|&&r| r == 1).count(), i);
    }

    #[test]
    fn estimates_of_empty_and_full_registers() {
        assert_eq!(estimate(&histogram(&new_sparse()).expect("valid")), 0);
        let mut h = [0u64; 64];
        h[1] = REGISTERS as u64;
        assert!(estimate(&h) > 10_000);
        let mut h = [0u64; 64];
        h[Q + 1] = REGISTERS as u64;
        // Every register saturated: τ(0) = 0, and the estimate is finite.
        assert!(estimate(&h) > 0);
    }

    #[test]
    fn corrupted_values_are_refused_not_trusted() {
        assert!(!is_hll(b"HYLL"));
        assert!(!is_hll(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"));
        assert!(!is_hll(b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0\x01"));
        assert!(!is_hll(b"HELL\x01\0\0\0\0\0\0\0\0\0\0\0"));
        // Opcodes that do not cover 16384 registers.
        let mut short = new_sparse();
        short.truncate(HDR_SIZE);
        short.push(zero(10));
        assert!(is_hll(&short));
        assert_eq!(histogram(&short), Err(Corrupt));
        assert_eq!(to_dense(&short), Err(Corrupt));
        assert_eq!(merge(&mut vec![0; REGISTERS], &short), Err(Corrupt));
        // A register inside the code changes; one past it is an error.
        let mut v = short.clone();
        let mut h = Hll::new(&mut v, SPARSE_MAX_BYTES);
        assert_eq!(h.raise(3, 2), Ok(true));
        assert_eq!(h.raise(100, 2), Err(Corrupt));
        // Too many: an XZERO over everything, then more (a VAL or a ZERO run). Every
        // reader refuses it (the original 7.0.15 merged and promoted such a value,
        // stopping at the VAL; the fix of CVE-2025-32023 in the oracle refuses it).
        for extra in [&[val(3, 4)][..], &[zero(3)], &[0x7f, 0xff]] {
            let mut long = new_sparse();
            long.extend_from_slice(extra);
            assert_eq!(histogram(&long), Err(Corrupt));
            assert_eq!(merge(&mut vec![0; REGISTERS], &long), Err(Corrupt));
            assert_eq!(to_dense(&long), Err(Corrupt));
            let mut h = Hll::new(&mut long, SPARSE_MAX_BYTES);
            assert_eq!(h.raise(5, 40), Err(Corrupt));
            // A register the code covers still rises in place.
            assert_eq!(h.raise(5, 3), Ok(true));
        }
        // No opcodes at all.
        let mut empty = new_sparse();
        empty.truncate(HDR_SIZE);
        assert_eq!(
            Hll::new(&mut empty, SPARSE_MAX_BYTES).raise(0, 1),
            Err(Corrupt)
        );
        // Random bytes never panic.
        let mut rng = Lcg(11);
        for _ in 0..2000 {
            let len = HDR_SIZE + (rng.next() % 40) as usize;
            let mut v = new_sparse();
            v.truncate(HDR_SIZE);
            v.resize(len, 0);
            for b in &mut v[HDR_SIZE..] {
                *b = rng.next() as u8;
            }
            let _ = histogram(&v);
            let _ = merge(&mut vec![0; REGISTERS], &v);
            let _ = decode(&v);
            let mut h = Hll::new(&mut v, 64);
            for _ in 0..4 {
                let _ = h.raise((rng.next() as usize) % REGISTERS, (rng.next() % 52) as u8);
            }
        }
    }

    #[test]
    fn a_truncated_xzero_reads_the_terminator() {
        // 255 registers in VAL/ZERO runs, then an XZERO cut after its first byte: 0x7f
        // then the terminator 0 covers 16129 registers, 16384 in all.
        let mut v = new_sparse();
        v.truncate(HDR_SIZE);
        for _ in 0..3 {
            v.push(zero(64));
        }
        v.push(zero(63));
        v.push(0x7f);
        assert_eq!(histogram(&v).map(|h| h[0]), Ok(REGISTERS as u64));
        let mut h = Hll::new(&mut v, SPARSE_MAX_BYTES);
        assert_eq!(h.raise(10_000, 3), Ok(true));
        // The change wrote its last byte where the terminator was.
        assert_eq!(h.tail, xzero(16383 - 10_000)[1]);
    }
}
