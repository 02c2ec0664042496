//! ACL, for the one user Goblin has — `default`, with every permission and the
//! `requirepass` password: WHOAMI, CAT, GENPASS, LIST, USERS, GETUSER, LOG (always
//! empty: nothing is ever denied), DRYRUN and HELP, with redis-server 7.0's replies.
//! Users of one's own (SETUSER, DELUSER, LOAD, SAVE) are not part of Goblin.

use crate::errors;
use crate::sha1::hex;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};

/// Registers ACL.
pub fn register(table: &mut CommandTable) {
    table.add_container(
        &meta::ACL,
        Exec::Container,
        &[
            ("whoami", None, Exec::Conn(whoami)),
            ("cat", None, Exec::Conn(cat)),
            ("genpass", None, Exec::Conn(genpass)),
            ("list", None, Exec::Conn(list)),
            ("users", None, Exec::Conn(users)),
            ("getuser", None, Exec::Conn(getuser)),
            ("log", None, Exec::Conn(log)),
            ("dryrun", None, Exec::Conn(dryrun)),
            ("help", None, Exec::Conn(help)),
        ],
    );
}

/// The categories, in Redis's order.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// More arguments than the subcommand takes (`aclCommand` checks them itself).
fn too_many(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    ctx.reply()
        .error(&errors::subcommand_syntax(b"acl", args.get(1)));
}

/// `ACL WHOAMI`
fn whoami(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.reply().bulk(b"default");
}

/// `ACL CAT [category]`: the categories, or the commands (and subcommands) in one.
fn cat(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 3 {
        return too_many(ctx, args);
    }
    if args.len() == 2 {
        let mut out = ctx.reply();
        out.array(CATEGORIES.len());
        for c in CATEGORIES {
            out.bulk(c.as_bytes());
        }
        return;
    }
    let wanted = args.get(2);
    if !CATEGORIES
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(wanted))
    {
        let mut msg = b"ERR Unknown category '".to_vec();
        msg.extend_from_slice(wanted);
        msg.push(b'\'');
        return ctx.reply().error_sanitized(&msg);
    }
    let wanted = wanted.to_vec();
    super::server::reply_command_names(ctx, |spec| spec.in_acl_category(&wanted));
}

/// `ACL GENPASS [bits]`: a random password of `bits` bits (256 by default), in hex.
fn genpass(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 3 {
        return too_many(ctx, args);
    }
    let bits = if args.len() == 3 {
        match goblin_protocol::parse_i64(args.get(2)) {
            Some(n) if (1..=4096).contains(&n) => n as usize,
            Some(_) => {
                return ctx.reply().error(
                    b"ERR ACL GENPASS argument must be the number of bits for the output \
                      password, a positive number up to 4096",
                );
            }
            None => return ctx.reply().error(errors::NOT_INTEGER),
        }
    } else {
        256
    };
    let chars = bits.div_ceil(4);
    let mut text = String::with_capacity(chars + 64);
    let mut counter = 0u64;
    let seed = crate::runtime::server::new_repl_id();
    while text.len() < chars {
        counter += 1;
        let block = crate::sha256::digest(format!("{seed}:{counter}").as_bytes());
        text.push_str(&hex(&block));
    }
    text.truncate(chars);
    ctx.reply().bulk(text.as_bytes());
}

/// The default user's password rule: `nopass`, or `#` and the password's SHA-256.
fn password_hash(ctx: &ConnCtx<'_>) -> Option<String> {
    let live = ctx.shared.live();
    live.requirepass
        .as_ref()
        .map(|p| hex(&crate::sha256::digest(p)))
}

/// `ACL LIST`: the one user, in configuration-file form.
fn list(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let pass = password_hash(ctx).map_or_else(|| "nopass".to_string(), |h| format!("#{h}"));
    let line = format!("user default on {pass} ~* &* +@all");
    let mut out = ctx.reply();
    out.array(1);
    out.bulk(line.as_bytes());
}

/// `ACL USERS`
fn users(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let mut out = ctx.reply();
    out.array(1);
    out.bulk(b"default");
}

/// `ACL GETUSER username`: the default user's rules; nil for anyone else.
fn getuser(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.get(2) != b"default" {
        return ctx.reply().null();
    }
    let hash = password_hash(ctx);
    let mut out = ctx.reply();
    out.map(6);
    out.bulk(b"flags");
    match &hash {
        Some(_) => {
            out.array(1);
            out.bulk(b"on");
        }
        None => {
            out.array(2);
            out.bulk(b"on");
            out.bulk(b"nopass");
        }
    }
    out.bulk(b"passwords");
    match &hash {
        Some(h) => {
            out.array(1);
            out.bulk(h.as_bytes());
        }
        None => out.array(0),
    }
    out.bulk(b"commands");
    out.bulk(b"+@all");
    out.bulk(b"keys");
    out.bulk(b"~*");
    out.bulk(b"channels");
    out.bulk(b"&*");
    out.bulk(b"selectors");
    out.array(0);
}

/// `ACL LOG [count | RESET]`: nothing is ever denied, so the log is empty.
fn log(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 3 {
        return too_many(ctx, args);
    }
    if args.len() == 3 {
        let arg = args.get(2);
        if arg.eq_ignore_ascii_case(b"reset") {
            return ctx.reply().ok();
        }
        if goblin_protocol::parse_i64(arg).is_none() {
            return ctx.reply().error(errors::NOT_INTEGER);
        }
    }
    ctx.reply().array(0);
}

/// `ACL DRYRUN username command [arg …]`: the default user may run any command with
/// the right number of arguments.
fn dryrun(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let user = args.get(2);
    if user != b"default" {
        let mut msg = b"ERR User '".to_vec();
        msg.extend_from_slice(user);
        msg.extend_from_slice(b"' not found");
        return ctx.reply().error_sanitized(&msg);
    }
    let table = &ctx.shared.commands;
    let name = args.get(3);
    let not_found = |ctx: &mut ConnCtx<'_>| {
        let mut msg = b"ERR Command '".to_vec();
        msg.extend_from_slice(name);
        msg.extend_from_slice(b"' not found");
        ctx.reply().error_sanitized(&msg);
    };
    let Some(mut spec) = table.lookup(name) else {
        return not_found(ctx);
    };
    let argc = args.len() - 3;
    // A container's subcommand must exist (the container is what Redis names).
    if spec.is_container() && argc >= 2 {
        match table.lookup_sub(spec, args.get(4)) {
            Some(sub) => spec = sub,
            None => return not_found(ctx),
        }
    }
    if !spec.arity_ok(argc) {
        let msg = errors::wrong_arity(spec.name);
        return ctx.reply().error(&msg);
    }
    ctx.reply().ok();
}

/// `ACL HELP`
fn help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Prints this help.",
        ],
    );
}
