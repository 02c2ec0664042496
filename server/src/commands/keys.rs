//! Keyspace commands: DEL, EXISTS, TTL, PTTL.

use crate::command::CommandTable;
use crate::command::meta;
use crate::exec::{Args, Exec, ShardCtx};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::DEL, Exec::Shard(del));
    table.add(&meta::EXISTS, Exec::Shard(exists));
    table.add(&meta::TTL, Exec::Shard(ttl));
    table.add(&meta::PTTL, Exec::Shard(pttl));
}

/// `DEL key [key ...]`: how many of the keys existed and were removed.
fn del(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let removed = args
        .iter_from(1)
        .filter(|key| ctx.db.remove(key, ctx.now).is_some())
        .count();
    ctx.out.integer(removed as i64);
}

/// `EXISTS key [key ...]`: how many of the keys exist, counting repeats.
fn exists(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let found = args
        .iter_from(1)
        .filter(|key| ctx.db.contains(key, ctx.now))
        .count();
    ctx.out.integer(found as i64);
}

/// Remaining time to live in milliseconds: -2 no key, -1 no expiry.
fn remaining_ms(ctx: &mut ShardCtx<'_>, key: &[u8]) -> i64 {
    match ctx.db.get(key, ctx.now) {
        None => -2,
        Some(entry) => match entry.expire_at() {
            None => -1,
            Some(at) => at.saturating_sub(ctx.now) as i64,
        },
    }
}

/// `TTL key`, rounded to the nearest second as Redis rounds it.
fn ttl(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let ms = remaining_ms(ctx, args.get(1));
    ctx.out.integer(if ms < 0 { ms } else { (ms + 500) / 1000 });
}

/// `PTTL key`
fn pttl(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let ms = remaining_ms(ctx, args.get(1));
    ctx.out.integer(ms);
}
