//! The two sorts redis-server 7.0 orders search results with, step for step, so that
//! results at equal distances (and at a NaN distance, which Redis's comparator orders
//! inconsistently) come out in its order:
//!
//! - [`merge_sort`]: glibc 2.36's `qsort` (`msort.c`): a top-down merge sort, the left
//!   half taking `n / 2`, a tie taken from the left — stable for a consistent comparator;
//! - [`partial_quicksort`]: Redis's `pqsort` (`pqsort.c`, Bentley and McIlroy's quicksort
//!   from NetBSD), which sorts only the partitions that overlap the range asked for (a
//!   search with COUNT that found more).
//!
//! Both take a comparator that answers like C's (`< 0`, `0`, `> 0`) and never panic,
//! whatever it answers. Neither allocates more than the array of indexes it sorts, and
//! the quicksort keeps its pending partitions on the heap rather than recursing.

use std::cmp::Ordering;

/// Sorts `items` as glibc's `qsort` does (its merge sort, the path taken for any array
/// that fits in a quarter of the memory).
pub fn merge_sort<T>(items: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    let n = items.len();
    if n <= 1 {
        return;
    }
    // glibc sorts pointers to elements larger than 32 bytes, and then moves the
    // elements: the same comparisons, in the same order.
    let mut order: Vec<usize> = (0..n).collect();
    let mut tmp = vec![0usize; n];
    merge_rec(&mut order, &mut tmp, &|a, b| cmp(&items[a], &items[b]));
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.iter().filter_map(|&i| slots[i].take()));
}

/// `msort_with_tmp`: sorts `b`, using `tmp` (at least as long).
fn merge_rec(b: &mut [usize], tmp: &mut [usize], cmp: &impl Fn(usize, usize) -> Ordering) {
    let n = b.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    {
        let (b1, b2) = b.split_at_mut(n1);
        merge_rec(b1, tmp, cmp);
        merge_rec(b2, tmp, cmp);
    }
    let (mut i, mut j, mut k) = (0, n1, 0);
    while i < n1 && j < n {
        if cmp(b[i], b[j]) != Ordering::Greater {
            tmp[k] = b[i];
            i += 1;
        } else {
            tmp[k] = b[j];
            j += 1;
        }
        k += 1;
    }
    // What is left of the left half follows; what is left of the right half is already
    // in place.
    while i < n1 {
        tmp[k] = b[i];
        i += 1;
        k += 1;
    }
    b[..k].copy_from_slice(&tmp[..k]);
}

/// Sorts `items` as Redis's `pqsort(items, n, size, cmp, lrange, rrange)` does: enough
/// that elements `lrange..=rrange` are those a full sort puts there, in order.
pub fn partial_quicksort<T>(
    items: &mut [T],
    cmp: impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
) {
    let (l, r) = (lrange as isize, rrange as isize);
    // Whether the partition of `n` elements from `a` overlaps the range (`_pqsort`'s
    // test, in elements rather than bytes).
    let wanted = |a: isize, n: isize| {
        let (s, e) = (a, a + n - 1);
        !((l < s && r < s) || (l > e && r > e))
    };
    // Partitions touch disjoint elements: the order they are sorted in does not matter.
    let mut pending: Vec<(isize, isize)> = vec![(0, items.len() as isize)];
    while let Some((a, n)) = pending.pop() {
        for part in partition(items, &cmp, a, n) {
            if wanted(part.0, part.1) {
                pending.push(part);
            }
        }
    }
}

/// C's comparator result.
fn c(o: Ordering) -> i32 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// `med3`: the index of the median of three, as Redis picks it.
fn med3<T>(v: &[T], a: isize, b: isize, cc: isize, cmp: &impl Fn(&T, &T) -> Ordering) -> isize {
    let at = |i: isize| &v[i as usize];
    let k = |x: isize, y: isize| c(cmp(at(x), at(y)));
    if k(a, b) < 0 {
        if k(b, cc) < 0 {
            b
        } else if k(a, cc) < 0 {
            cc
        } else {
            a
        }
    } else if k(b, cc) > 0 {
        b
    } else if k(a, cc) < 0 {
        a
    } else {
        cc
    }
}

/// Swaps the `n` elements from `a` with the `n` from `b` (`vecswap`).
fn vecswap<T>(v: &mut [T], a: isize, b: isize, n: isize) {
    for i in 0..n.max(0) {
        v.swap((a + i) as usize, (b + i) as usize);
    }
}

/// One pass of `_pqsort` over the `n` elements from `a`: an insertion sort when they are
/// few (no partitions left), else a three-way partition around a pivot; the partitions
/// still to sort (left, then right), of at least two elements.
fn partition<T>(
    v: &mut [T],
    cmp: &impl Fn(&T, &T) -> Ordering,
    a: isize,
    n: isize,
) -> Vec<(isize, isize)> {
    let k = |v: &[T], x: isize, y: isize| c(cmp(&v[x as usize], &v[y as usize]));
    let swap = |v: &mut [T], x: isize, y: isize| v.swap(x as usize, y as usize);
    if n < 7 {
        for pm in a + 1..a + n {
            let mut pl = pm;
            while pl > a && k(v, pl - 1, pl) > 0 {
                swap(v, pl, pl - 1);
                pl -= 1;
            }
        }
        return Vec::new();
    }
    let mut pm = a + n / 2;
    if n > 7 {
        let mut pl = a;
        let mut pn = a + n - 1;
        if n > 40 {
            let d = n / 8;
            pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
            pm = med3(v, pm - d, pm, pm + d, cmp);
            pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
        }
        pm = med3(v, pl, pm, pn, cmp);
    }
    swap(v, a, pm);
    let (mut pa, mut pb) = (a + 1, a + 1);
    let (mut pc, mut pd) = (a + n - 1, a + n - 1);
    loop {
        while pb <= pc {
            let r = k(v, pb, a);
            if r > 0 {
                break;
            }
            if r == 0 {
                swap(v, pa, pb);
                pa += 1;
            }
            pb += 1;
        }
        while pb <= pc {
            let r = k(v, pc, a);
            if r < 0 {
                break;
            }
            if r == 0 {
                swap(v, pc, pd);
                pd -= 1;
            }
            pc -= 1;
        }
        if pb > pc {
            break;
        }
        swap(v, pb, pc);
        pb += 1;
        pc -= 1;
    }
    let pn = a + n;
    let r = (pa - a).min(pb - pa);
    vecswap(v, a, pb - r, r);
    let r = (pd - pc).min(pn - pd - 1);
    vecswap(v, pb, pn - r, r);
    let mut parts = Vec::new();
    let r = pb - pa;
    if r > 1 {
        parts.push((a, r));
    }
    let r = pd - pc;
    if r > 1 {
        parts.push((pn - r, r));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, for the tests' data.
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *seed >> 33
    }

    #[test]
    fn merge_sort_is_a_stable_sort() {
        let mut seed = 7;
        for n in [0, 1, 2, 3, 7, 8, 41, 100, 1000] {
            let mut v: Vec<(u64, usize)> = (0..n).map(|i| (lcg(&mut seed) % 10, i)).collect();
            let mut want = v.clone();
            want.sort_by_key(|p| p.0);
            merge_sort(&mut v, |a, b| a.0.cmp(&b.0));
            assert_eq!(v, want, "n = {n}");
        }
    }

    #[test]
    fn partial_quicksort_sorts_the_range_asked_for() {
        let mut seed = 11;
        for n in [1usize, 2, 6, 7, 8, 40, 41, 100, 1000, 5000] {
            for count in [1usize, 2, 5, 10, 100] {
                let count = count.min(n);
                let mut v: Vec<u64> = (0..n).map(|_| lcg(&mut seed) % 50).collect();
                let mut full = v.clone();
                full.sort_unstable();
                partial_quicksort(&mut v, |a, b| a.cmp(b), 0, count - 1);
                assert_eq!(v[..count], full[..count], "n = {n}, count = {count}");
                let mut rest = v.clone();
                rest.sort_unstable();
                assert_eq!(rest, full, "a permutation");
            }
        }
    }

    #[test]
    fn inconsistent_comparators_do_not_panic() {
        let mut seed = 3;
        let v: Vec<f64> = (0..500)
            .map(|_| match lcg(&mut seed) % 4 {
                0 => f64::NAN,
                x => x as f64,
            })
            .collect();
        let nan_first = |a: &f64, b: &f64| {
            if a > b {
                Ordering::Greater
            } else if a == b {
                Ordering::Equal
            } else {
                Ordering::Less
            }
        };
        let mut m = v.clone();
        merge_sort(&mut m, nan_first);
        assert_eq!(m.len(), v.len());
        let mut q = v.clone();
        partial_quicksort(&mut q, nan_first, 0, 9);
        assert_eq!(q.len(), v.len());
    }
}
