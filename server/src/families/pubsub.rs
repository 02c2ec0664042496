//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE,
//! PUBLISH, SPUBLISH, PUBSUB. Connection commands: subscriptions belong to the
//! connection, and a publication goes through the worker's outgoing buffers to every
//! worker with receivers (`runtime/pubsub.rs`).
//!
//! Shard channels are their own name space, as in a standalone redis-server 7.0: they
//! are named like keys (COMMAND GETKEYS reports them) but live on the connection's
//! thread like the other channels.

use crate::runtime::pubsub::Space;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    for (meta, f) in [
        (
            &meta::SUBSCRIBE,
            subscribe as fn(&mut ConnCtx<'_>, &Args<'_>),
        ),
        (&meta::UNSUBSCRIBE, unsubscribe),
        (&meta::PSUBSCRIBE, psubscribe),
        (&meta::PUNSUBSCRIBE, punsubscribe),
        (&meta::SSUBSCRIBE, ssubscribe),
        (&meta::SUNSUBSCRIBE, sunsubscribe),
    ] {
        table.add(meta, Exec::Conn(f)).while_subscribed();
    }
    table.add(&meta::PUBLISH, Exec::Conn(publish));
    table.add(&meta::SPUBLISH, Exec::Conn(spublish));
    table.add_container(
        &meta::PUBSUB,
        Exec::Container,
        &[
            ("channels", None, Exec::Conn(pubsub_channels)),
            ("numsub", None, Exec::Conn(pubsub_numsub)),
            ("numpat", None, Exec::Conn(pubsub_numpat)),
            ("shardchannels", None, Exec::Conn(pubsub_shardchannels)),
            ("shardnumsub", None, Exec::Conn(pubsub_shardnumsub)),
            ("help", None, Exec::Conn(pubsub_help)),
        ],
    );
}

/// The word a (un)subscription's confirmation starts with.
fn confirmation(space: Space, subscribing: bool) -> &'static [u8] {
    match (space, subscribing) {
        (Space::Channels, true) => b"subscribe",
        (Space::Channels, false) => b"unsubscribe",
        (Space::Patterns, true) => b"psubscribe",
        (Space::Patterns, false) => b"punsubscribe",
        (Space::ShardChannels, true) => b"ssubscribe",
        (Space::ShardChannels, false) => b"sunsubscribe",
    }
}

/// A confirmation: `[kind, name (or nil), the client's subscription count]`, a push
/// message in RESP3.
fn confirm(ctx: &mut ConnCtx<'_>, space: Space, subscribing: bool, name: Option<&[u8]>) {
    let count = ctx.client.subs.counted(space);
    let mut out = ctx.reply();
    out.push(3);
    out.bulk(confirmation(space, subscribing));
    match name {
        Some(name) => out.bulk(name),
        None => out.null(),
    }
    out.integer(count as i64);
}

/// Subscribes to each name, confirming each.
fn subscribe_to(ctx: &mut ConnCtx<'_>, args: &Args<'_>, space: Space) {
    for i in 1..args.len() {
        let name = args.get(i);
        ctx.hub
            .subscribe(&ctx.shared.pubsub, &mut ctx.client.subs, space, name);
        confirm(ctx, space, true, Some(name));
    }
}

/// Unsubscribes from each name (from every one of the space without names), confirming
/// each; with none to leave, one confirmation with a nil name.
fn unsubscribe_from(ctx: &mut ConnCtx<'_>, args: &Args<'_>, space: Space) {
    if args.len() > 1 {
        for i in 1..args.len() {
            let name = args.get(i);
            ctx.hub
                .unsubscribe(&ctx.shared.pubsub, &mut ctx.client.subs, space, name);
            confirm(ctx, space, false, Some(name));
        }
        return;
    }
    let names = ctx.client.subs.names(space);
    if names.is_empty() {
        confirm(ctx, space, false, None);
    }
    for name in names {
        ctx.hub
            .unsubscribe(&ctx.shared.pubsub, &mut ctx.client.subs, space, &name);
        confirm(ctx, space, false, Some(&name));
    }
}

/// `SUBSCRIBE channel [channel ...]`
fn subscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    subscribe_to(ctx, args, Space::Channels);
}

/// `UNSUBSCRIBE [channel ...]`
fn unsubscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    unsubscribe_from(ctx, args, Space::Channels);
}

/// `PSUBSCRIBE pattern [pattern ...]`
fn psubscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    subscribe_to(ctx, args, Space::Patterns);
}

/// `PUNSUBSCRIBE [pattern ...]`
fn punsubscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    unsubscribe_from(ctx, args, Space::Patterns);
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`
fn ssubscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    subscribe_to(ctx, args, Space::ShardChannels);
}

/// `SUNSUBSCRIBE [shardchannel ...]`
fn sunsubscribe(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    unsubscribe_from(ctx, args, Space::ShardChannels);
}

/// `PUBLISH channel message`: the number of receivers, on every thread.
fn publish(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    publish_to(ctx, args);
}

/// `SPUBLISH shardchannel message`
fn spublish(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    publish_to(ctx, args);
}

/// Publishes the message argument to the channel argument; replies the receivers.
fn publish_to(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let argv = [args.get(0), args.get(1), args.get(2)];
    let feed = ctx.hub.repl.as_deref_mut();
    let at = Publishing {
        db: ctx.client.db as u16,
        in_script: false,
        repl: crate::scripting::engine::REPL_ALL,
    };
    let n = publish_command(ctx.shared, ctx.hub.out, feed, argv, at);
    ctx.reply().integer(n as i64);
}

/// Where a PUBLISH or SPUBLISH runs, for [`publish_command`].
pub(crate) struct Publishing {
    /// Its client's database (its SELECT in the replication stream).
    pub db: u16,
    /// A script calls it: it goes to replicas among the script's writes.
    pub in_script: bool,
    /// Where `redis.set_repl` lets it go (`REPL_ALL` outside scripts).
    pub repl: u8,
}

/// `PUBLISH` or `SPUBLISH` (`argv`: the name, the channel, the message) from a thread
/// whose outgoing publications are `out`: the number of receivers. Replicas are sent it
/// too, through the thread's replication feed, in order with its writes (as
/// redis-server's `forceCommandPropagation`) — not in cluster mode, where the bus
/// carries publications, nor from a script whose `redis.set_repl` leaves replicas out.
pub(crate) fn publish_command(
    shared: &crate::runtime::server::Shared,
    out: &mut crate::runtime::pubsub::Outbound,
    feed: Option<&mut crate::repl::master::Feed>,
    argv: [&[u8]; 3],
    at: Publishing,
) -> usize {
    let space = if argv[0].eq_ignore_ascii_case(b"spublish") {
        Space::ShardChannels
    } else {
        Space::Channels
    };
    let n = out.publish(&shared.pubsub, space, argv[1], argv[2]);
    // (Redis Cluster: the bus carries it to the other nodes; the reply counts this
    // node's receivers.)
    if let Some(cluster) = shared.cluster.as_deref() {
        cluster.publish(space == Space::ShardChannels, argv[1], argv[2]);
    }
    if let Some(feed) = feed
        && shared.cluster.is_none()
        && at.repl & crate::scripting::engine::REPL_REPLICA != 0
    {
        feed.propagate(at.db, &argv, at.in_script);
    }
    n
}

/// The active channels of `space` matching the optional pattern argument.
fn list_channels(ctx: &mut ConnCtx<'_>, args: &Args<'_>, space: Space) {
    let pattern = (args.len() > 2).then(|| args.get(2));
    let names = ctx.shared.pubsub.names(space, pattern);
    let mut out = ctx.reply();
    out.array(names.len());
    for name in &names {
        out.bulk(name);
    }
}

/// Each channel argument and its subscriber count, flat (also in RESP3, as redis-server
/// 7.0 answers).
fn count_subscribers(ctx: &mut ConnCtx<'_>, args: &Args<'_>, space: Space) {
    let dir = &ctx.shared.pubsub;
    let counts: Vec<usize> = (2..args.len())
        .map(|i| dir.subscribers(space, args.get(i)))
        .collect();
    let mut out = ctx.reply();
    out.array(counts.len() * 2);
    for (i, n) in (2..args.len()).zip(counts) {
        out.bulk(args.get(i));
        out.integer(n as i64);
    }
}

/// `PUBSUB CHANNELS [pattern]`
fn pubsub_channels(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    list_channels(ctx, args, Space::Channels);
}

/// `PUBSUB SHARDCHANNELS [pattern]`
fn pubsub_shardchannels(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    list_channels(ctx, args, Space::ShardChannels);
}

/// `PUBSUB NUMSUB [channel ...]`
fn pubsub_numsub(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    count_subscribers(ctx, args, Space::Channels);
}

/// `PUBSUB SHARDNUMSUB [shardchannel ...]`
fn pubsub_shardnumsub(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    count_subscribers(ctx, args, Space::ShardChannels);
}

/// `PUBSUB NUMPAT`: distinct patterns subscribed to.
fn pubsub_numpat(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let n = ctx.shared.pubsub.patterns();
    ctx.reply().integer(n as i64);
}

/// `PUBSUB HELP`
fn pubsub_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}
