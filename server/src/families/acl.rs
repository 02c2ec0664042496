//! ACL: users and their permissions (`crate::acl`), with redis-server 7.0's replies —
//! SETUSER, DELUSER, GETUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG, DRYRUN and HELP.
//! LOAD and SAVE answer as redis-server does without an ACL file (Goblin has none).

use crate::errors;
use crate::runtime::ask::WorkerView;
use crate::sha1::hex;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};

/// Registers ACL.
pub fn register(table: &mut CommandTable) {
    table.add_container(
        &meta::ACL,
        Exec::Container,
        &[
            (
                "setuser",
                None,
                Exec::AskWorkers {
                    ask: setuser_ask,
                    gather: setuser,
                },
            ),
            (
                "deluser",
                None,
                Exec::AskWorkers {
                    ask: deluser_ask,
                    gather: deluser,
                },
            ),
            (
                "load",
                None,
                Exec::AskWorkers {
                    ask: load_ask,
                    gather: load,
                },
            ),
            ("save", None, Exec::Conn(save)),
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

use crate::acl::{CATEGORIES, Denied};

/// More arguments than the subcommand takes (`aclCommand` checks them itself).
fn too_many(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    ctx.reply()
        .error(&errors::subcommand_syntax(b"acl", args.get(1)));
}

/// `ACL WHOAMI`
fn whoami(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let name = ctx.client.user.name.clone();
    ctx.reply().bulk(&name);
}

/// ACL SETUSER's question to each worker: close the clients of the user whose
/// subscriptions the rules, once applied, no longer allow (redis-server's
/// `ACLKillPubsubClientsIfNeeded`). The rules are applied once every worker answered.
fn setuser_ask(view: &mut WorkerView<'_>, args: &Args<'_>) -> Vec<u8> {
    let rules: Vec<&[u8]> = args.iter_from(3).collect();
    let shared = view.shared();
    let Some(user) = shared.acl.preview(&shared.commands, args.get(2), &rules) else {
        return Vec::new();
    };
    view.kill_clients(|v, c| {
        !v.is_asker(c)
            && c.user.name == user.name
            && c.subs.active()
            && !c
                .subs
                .all(|name, pattern| user.may_subscribe(name, pattern))
    });
    Vec::new()
}

/// `ACL SETUSER username [rule …]`: every rule applies, or none.
fn setuser(ctx: &mut ConnCtx<'_>, args: &Args<'_>, _answers: Vec<Vec<u8>>) {
    let rules: Vec<&[u8]> = args.iter_from(3).collect();
    match ctx
        .shared
        .acl
        .set_user(&ctx.shared.commands, args.get(2), &rules)
    {
        Ok(()) => ctx.reply().ok(),
        Err(e) => ctx.reply().error_sanitized(&e),
    }
}

/// ACL DELUSER's question to each worker: close the clients of the users it deletes
/// (none if it fails: `default` is among them). The one that asks is closed once
/// answered, if its own user goes.
fn deluser_ask(view: &mut WorkerView<'_>, args: &Args<'_>) -> Vec<u8> {
    let names: Vec<&[u8]> = args.iter_from(2).collect();
    if names.contains(&&b"default"[..]) {
        return Vec::new();
    }
    view.kill_clients(|v, c| !v.is_asker(c) && names.contains(&c.user.name.as_slice()));
    Vec::new()
}

/// `ACL DELUSER username …`: how many existed. Their clients were closed by
/// [`deluser_ask`]; one that authenticates as such a user meanwhile is closed as it
/// next sends a command.
fn deluser(ctx: &mut ConnCtx<'_>, args: &Args<'_>, _answers: Vec<Vec<u8>>) {
    let names: Vec<&[u8]> = args.iter_from(2).collect();
    match ctx.shared.acl.delete_users(&names) {
        Ok(n) => {
            if names.contains(&ctx.client.user.name.as_slice()) {
                ctx.client.close_after_reply = true;
            }
            ctx.reply().integer(n as i64);
        }
        Err(e) => ctx.reply().error_sanitized(&e),
    }
}

const NO_ACL_FILE: &[u8] = b"ERR This Redis instance is not configured to use an ACL file. \
    You may want to specify users via the ACL SETUSER command and then issue a CONFIG \
    REWRITE (assuming you have a Redis configuration file set) in order to store users in \
    the Redis configuration.";

/// The ACL file's text, or the error ACL LOAD answers.
fn acl_file(shared: &crate::runtime::server::Shared) -> Result<(String, String), Vec<u8>> {
    let Some(path) = shared.config.aclfile.as_ref() else {
        return Err(NO_ACL_FILE.to_vec());
    };
    let shown = path.to_string_lossy().into_owned();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((text, shown)),
        Err(e) => Err(format!(
            "ERR Error loading ACLs, opening file '{shown}': {}",
            crate::util::strerror(&e)
        )
        .into_bytes()),
    }
}

/// ACL LOAD's question to each worker: when the file loads, the clients of every user
/// but `default` are closed (redis-server frees every user it had, and the clients
/// authenticated as one; the asker after its reply).
fn load_ask(view: &mut WorkerView<'_>, _args: &Args<'_>) -> Vec<u8> {
    let shared = view.shared();
    let loads = acl_file(shared).is_ok_and(|(text, shown)| {
        shared
            .acl
            .parse_file(&shared.commands, &text, &shown)
            .is_ok()
    });
    if loads {
        view.kill_clients(|v, c| !v.is_asker(c) && c.user.name != b"default");
    }
    Vec::new()
}

/// `ACL LOAD`: the users become those of the ACL file, all or none. The clients of
/// users other than `default` were closed by [`load_ask`]; this one is closed after
/// its reply, and one that authenticated meanwhile as a user the file no longer has,
/// as it next sends a command.
fn load(ctx: &mut ConnCtx<'_>, _args: &Args<'_>, _answers: Vec<Vec<u8>>) {
    let (text, shown) = match acl_file(ctx.shared) {
        Ok(file) => file,
        Err(e) => return ctx.reply().error_sanitized(&e),
    };
    match ctx.shared.acl.load(&ctx.shared.commands, &text, &shown) {
        Ok(()) => {
            if ctx.client.user.name != b"default" {
                ctx.client.close_after_reply = true;
            }
            ctx.reply().ok()
        }
        Err(e) => ctx.reply().error_sanitized(format!("ERR {e}").as_bytes()),
    }
}

/// `ACL SAVE`: every user written to the ACL file (a new file renamed over the old).
fn save(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(path) = ctx.shared.config.aclfile.clone() else {
        return ctx.reply().error(NO_ACL_FILE);
    };
    let mut text = ctx.shared.acl.lines(&ctx.shared.commands).join("\n");
    text.push('\n');
    let tmp = path.with_extension("goblin-tmp");
    let written = std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, &path));
    match written {
        Ok(()) => ctx.reply().ok(),
        Err(e) => {
            crate::log!(
                Warning,
                "Opening ACL file for writing: {}",
                crate::util::strerror(&e)
            );
            let _ = std::fs::remove_file(&tmp);
            ctx.reply().error(
                b"ERR There was an error trying to save the ACLs. Please check the server \
                  logs for more information",
            );
        }
    }
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

/// `ACL LIST`: every user, in configuration-file form, by name.
fn list(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let lines = ctx.shared.acl.lines(&ctx.shared.commands);
    let mut out = ctx.reply();
    out.array(lines.len());
    for line in &lines {
        out.bulk(line.as_bytes());
    }
}

/// `ACL USERS`: every user's name, in order.
fn users(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let users = ctx.shared.acl.users();
    let mut out = ctx.reply();
    out.array(users.len());
    for u in &users {
        out.bulk(&u.name);
    }
}

/// `ACL GETUSER username`: flags, passwords, and the commands, keys and channels of its
/// root permissions and of each selector; nil for no such user.
fn getuser(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(user) = ctx.shared.acl.user(args.get(2)).0 else {
        return ctx.reply().null();
    };
    let views = user.views(&ctx.shared.commands);
    let mut out = ctx.reply();
    out.map(6);
    out.bulk(b"flags");
    let flags = user.flags();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(user.passwords().len());
    for p in user.passwords() {
        out.bulk(p.as_bytes());
    }
    // The root's three fields, then each selector's as a map of them.
    let fields = |out: &mut goblin_protocol::Encoder<'_>, view: &[String; 3]| {
        for (name, value) in ["commands", "keys", "channels"].iter().zip(view) {
            out.bulk(name.as_bytes());
            out.bulk(value.as_bytes());
        }
    };
    let mut views = views.iter();
    if let Some(root) = views.next() {
        fields(&mut out, root);
    }
    out.bulk(b"selectors");
    out.array(views.len());
    for view in views {
        out.map(3);
        fields(&mut out, view);
    }
}

/// `ACL LOG [count | RESET]`: the newest refusals first (10 by default).
fn log(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 3 {
        return too_many(ctx, args);
    }
    let mut count = 10;
    if args.len() == 3 {
        let arg = args.get(2);
        if arg.eq_ignore_ascii_case(b"reset") {
            ctx.shared.acl.reset_log();
            return ctx.reply().ok();
        }
        match goblin_protocol::parse_i64(arg) {
            // (A negative count lists nothing, as in redis-server.)
            Some(n) => count = usize::try_from(n).unwrap_or(0),
            None => return ctx.reply().error(errors::NOT_INTEGER),
        }
    }
    let entries = ctx.shared.acl.log_entries(count);
    let now = ctx.now;
    let mut out = ctx.reply();
    out.array(entries.len());
    for e in &entries {
        out.map(7);
        out.bulk(b"count");
        out.integer(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
}

/// `ACL DRYRUN username command [arg …]`: whether the user may run the command, as OK
/// or the reason it may not.
fn dryrun(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(user) = ctx.shared.acl.user(args.get(2)).0 else {
        let mut msg = b"ERR User '".to_vec();
        msg.extend_from_slice(args.get(2));
        msg.extend_from_slice(b"' not found");
        return ctx.reply().error_sanitized(&msg);
    };
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
    let command = args.skip(3);
    let why = match user.check(spec, &command) {
        Ok(()) => return ctx.reply().ok(),
        Err(Denied::Command) => format!(
            "This user has no permissions to run the '{}' command",
            spec.name
        ),
        Err(Denied::Key(i)) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(command.get(i))
        ),
        Err(Denied::Channel(i)) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(command.get(i))
        ),
    };
    ctx.reply().bulk(why.as_bytes());
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
