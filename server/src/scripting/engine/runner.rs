//! The command runner of the script run in progress on a thread.
//!
//! `redis.call` and `redis.pcall` are made once per interpreter (making them for each
//! run, bound to its borrows, costs a tenth of a short script's time), so they cannot
//! hold what a run borrows: the shard, the invocation. The run lends them its runner
//! through a thread-local pointer instead, for exactly as long as it runs. The two
//! `unsafe` blocks below are the whole of it; the proof is beside each, and the tests
//! at the end exercise every path (as does every script test).
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ptr::NonNull;

use goblin_protocol::Version;

use super::Called;

/// What a script's commands run with: the arguments, the protocol the script reads
/// replies in, and the buffer for the reply (empty).
pub type Runner<'a> =
    dyn FnMut(&crate::table::args::Args<'_>, Version, &mut Vec<u8>) -> Called + 'a;

thread_local! {
    /// The command runner of the run in progress on this thread, for `redis.call` and
    /// `redis.pcall` (made once per interpreter, so not bound to the run's borrows).
    static RUNNER: Cell<Option<NonNull<Runner<'static>>>> = const { Cell::new(None) };
}

/// Puts a runner back in [`RUNNER`] (the one before the run) when the run ends, unwinding
/// too.
struct Restore(Option<NonNull<Runner<'static>>>);

impl Drop for Restore {
    fn drop(&mut self) {
        RUNNER.with(|r| r.set(self.0));
    }
}

/// Runs `f` with `runner` as the thread's command runner ([`call_runner`] reaches it).
pub(super) fn with_runner<R>(runner: &mut Runner<'_>, f: impl FnOnce() -> R) -> R {
    let ptr = NonNull::from(runner);
    // SAFETY: the transmute changes only the trait object's lifetime bound (the layout
    // is the same). The erased lifetime is never relied on past this call: the pointer
    // comes from the `&mut` this function holds (moved into it, so it is the only path
    // to the runner while `f` runs), and `Restore` takes it out of RUNNER before this
    // function returns or unwinds, so it is never read after the borrow ends. RUNNER is
    // thread-local: no other thread sees it. `call_runner` is the only reader, and it
    // takes the pointer out while it uses it, so a nested call finds none and there is
    // never a second `&mut` to the runner.
    let ptr = unsafe { std::mem::transmute::<NonNull<Runner<'_>>, NonNull<Runner<'static>>>(ptr) };
    let _restore = Restore(RUNNER.with(|r| r.replace(Some(ptr))));
    f()
}

/// Runs a command with the thread's command runner: `None` outside [`with_runner`] (or
/// from inside the runner itself).
pub(super) fn call_runner(
    argv: &crate::table::args::Args<'_>,
    resp: Version,
    reply: &mut Vec<u8>,
) -> Option<Called> {
    let mut ptr = RUNNER.with(Cell::take)?;
    // SAFETY: see `with_runner`: the pointer in RUNNER is valid and unaliased while it is
    // there, and it is taken out for this call, so this `&mut` is the only one.
    let called = unsafe { ptr.as_mut() }(argv, resp, reply);
    RUNNER.with(|r| r.set(Some(ptr)));
    Some(called)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::args::Args;
    use crate::testkit::Cmd;

    #[test]
    fn a_run_lends_its_runner_for_exactly_its_duration() {
        let get = Cmd::new(&[b"get", b"k"]);
        let mut seen = Vec::new();
        let mut reply = Vec::new();
        assert!(call_runner(&get.args(), Version::Resp2, &mut reply).is_none());
        {
            let mut runner = |a: &Args<'_>, resp: Version, out: &mut Vec<u8>| {
                seen.push((a.get(1).to_vec(), resp));
                out.extend_from_slice(b"+OK\r\n");
                Called::Reply
            };
            let got = with_runner(&mut runner, || {
                let mut reply = Vec::new();
                let a = call_runner(&get.args(), Version::Resp3, &mut reply);
                let b = call_runner(&get.args(), Version::Resp2, &mut reply);
                (
                    matches!(a, Some(Called::Reply)) && matches!(b, Some(Called::Reply)),
                    reply,
                )
            });
            assert_eq!(got, (true, b"+OK\r\n+OK\r\n".to_vec()));
        }
        assert_eq!(
            seen,
            vec![
                (b"k".to_vec(), Version::Resp3),
                (b"k".to_vec(), Version::Resp2)
            ]
        );
        // Gone once the run is over.
        assert!(call_runner(&get.args(), Version::Resp2, &mut reply).is_none());
    }

    #[test]
    fn the_runner_cannot_reach_itself_and_nested_runs_restore_the_outer_one() {
        let ping = Cmd::new(&[b"ping"]);
        let mut inner_found = None;
        let mut outer = |a: &Args<'_>, _: Version, out: &mut Vec<u8>| {
            // From inside the runner, there is none to call (no second `&mut`).
            inner_found = Some(call_runner(a, Version::Resp2, out).is_some());
            Called::Wrote
        };
        with_runner(&mut outer, || {
            let mut nested =
                |_: &Args<'_>, _: Version, _: &mut Vec<u8>| Called::Refused(b"x".to_vec());
            let mut reply = Vec::new();
            let a = ping.args();
            let n = with_runner(&mut nested, || call_runner(&a, Version::Resp2, &mut reply));
            assert!(matches!(n, Some(Called::Refused(_))));
            // The outer runner is back.
            assert!(matches!(
                call_runner(&a, Version::Resp2, &mut reply),
                Some(Called::Wrote)
            ));
        });
        assert_eq!(inner_found, Some(false));
    }

    #[test]
    fn a_panic_in_the_run_leaves_no_runner_behind() {
        let ping = Cmd::new(&[b"ping"]);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut runner =
                |_: &Args<'_>, _: Version, _: &mut Vec<u8>| -> Called { panic!("boom") };
            with_runner(&mut runner, || {
                let mut reply = Vec::new();
                call_runner(&ping.args(), Version::Resp2, &mut reply)
            })
        }));
        assert!(caught.is_err());
        let mut reply = Vec::new();
        assert!(call_runner(&ping.args(), Version::Resp2, &mut reply).is_none());
    }
}
