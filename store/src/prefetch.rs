//! Software prefetch: a hint that a cache line will be read soon, so that the memory
//! latencies of several lookups overlap instead of adding up (a pipeline's keys are
//! looked up ahead of running its commands, `Keyspace::prefetch`).
//!
//! The store's one `unsafe` block, proven sound beside it.
#![allow(unsafe_code)]

/// Asks the CPU to start loading the cache line at `p` into every cache level. A hint: it
/// changes no state a program can observe, and costs one instruction.
#[inline(always)]
pub fn read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and has no architectural effect (Intel SDM vol. 2,
    // "PREFETCHh": "a prefetch instruction is considered a hint … it does not affect
    // program behavior"), whatever the address: valid, dangling or null. The only
    // precondition of the intrinsic is its target feature, SSE, which every x86_64 CPU
    // has (it is in the x86_64 baseline that rustc compiles for).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_any_address_is_harmless() {
        let data = vec![7u8; 4096];
        read(data.as_ptr());
        read(data.as_ptr().wrapping_add(4095));
        // Addresses that are not readable: a hint never faults.
        read(std::ptr::null());
        read(usize::MAX as *const u8);
        let dangling = {
            let gone = Box::new([1u8; 64]);
            gone.as_ptr()
        };
        read(dangling);
        assert_eq!(data[4095], 7);
    }
}
