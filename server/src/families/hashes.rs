//! Hash commands — for now the minimum that creates and reads hashes: HSET, HGET.

use goblin_store::{Value, ValueMut, ValueRef};

use crate::errors;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::HSET, Exec::Shard(hset));
    table.add(&meta::HGET, Exec::Shard(hget));
}

/// `HSET key field value [field value ...]`: how many fields were new.
fn hset(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    if args.len() % 2 == 1 {
        return ctx.out.error(&errors::wrong_arity("hset"));
    }
    let added = ctx.db.upsert(
        args.get(1),
        ctx.now,
        || Value::Hash(Box::default()),
        |value| match value {
            ValueMut::Boxed(Value::Hash(hash)) => {
                let added = (2..args.len())
                    .step_by(2)
                    .filter(|&i| hash.insert(args.get(i), args.get(i + 1)))
                    .count();
                (Some(added as i64), true)
            }
            _ => (None, false),
        },
    );
    match added.flatten() {
        Some(n) => ctx.out.integer(n),
        None => ctx.out.error(errors::WRONGTYPE),
    }
}

/// `HGET key field`
fn hget(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    match ctx.db.get(args.get(1), ctx.now).map(|e| e.value()) {
        None => ctx.out.null(),
        Some(ValueRef::Hash(h)) => match h.get(args.get(2)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        },
        Some(_) => ctx.out.error(errors::WRONGTYPE),
    }
}
