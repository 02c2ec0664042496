//! Every error text Goblin sends, byte for byte as redis-server 7 sends it.
//!
//! Fixed texts are constants; texts that carry client bytes are built here with C's
//! `%s` semantics (a NUL ends the string) and are sent through
//! [`goblin_protocol::Encoder::error_sanitized`], as Redis's `addReplyErrorFormat` does.

use goblin_protocol::Encoder;

use crate::table::args::Args;

/// An error reply, as parsers and handlers return it: a fixed text, or one built around
/// client bytes. Plans hand theirs on as bytes (`Vec<u8>: From<ErrorReply>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorReply {
    /// A fixed text, sent as it is (Redis's `addReplyError` and shared error objects).
    Fixed(&'static [u8]),
    /// A text that carries client bytes, sent as Redis's `addReplyErrorFormat` sends it:
    /// CR and LF trimmed from both ends and turned into spaces within.
    Formatted(Vec<u8>),
}

impl ErrorReply {
    /// The error text.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ErrorReply::Fixed(text) => text,
            ErrorReply::Formatted(text) => text,
        }
    }

    /// Sends the error.
    pub fn send(&self, out: &mut Encoder<'_>) {
        match self {
            ErrorReply::Fixed(text) => out.error(text),
            ErrorReply::Formatted(text) => out.error_sanitized(text),
        }
    }
}

impl From<&'static [u8]> for ErrorReply {
    fn from(text: &'static [u8]) -> Self {
        ErrorReply::Fixed(text)
    }
}

impl From<ErrorReply> for Vec<u8> {
    fn from(e: ErrorReply) -> Self {
        match e {
            ErrorReply::Fixed(text) => text.to_vec(),
            ErrorReply::Formatted(text) => text,
        }
    }
}

/// A syntax error in the options.
pub const SYNTAX: &[u8] = b"ERR syntax error";

/// A write while fewer replicas than `min-replicas-to-write` are in touch.
pub const NOREPLICAS: &[u8] = b"NOREPLICAS Not enough good replicas to write.";

/// A replica whose link is down refuses what may read stale data
/// (`replica-serve-stale-data no`).
pub const MASTERDOWN: &[u8] =
    b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// A write on a read-only replica (`replica-read-only yes`).
pub const READONLY_REPLICA: &[u8] = b"READONLY You can't write against a read only replica.";
/// An argument that must be an integer is not one.
pub const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
/// An argument that must fit a C `int` does not (`getIntFromObjectOrReply`).
pub const INT_OUT_OF_RANGE: &[u8] =
    b"ERR value is out of range, value must between -2147483648 and 2147483647";
/// An argument (or a stored string) that must be a float is not one.
pub const NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
/// The key holds a value of another type.
pub const WRONGTYPE: &[u8] = b"WRONGTYPE Operation against a key holding the wrong kind of value";
/// SELECT of a database other than 0.
pub const DB_INDEX_OUT_OF_RANGE: &[u8] = b"ERR DB index is out of range";
/// SWAPDB's first index is not an integer.
pub const INVALID_FIRST_DB: &[u8] = b"ERR invalid first DB index";
/// SWAPDB's second index is not an integer.
pub const INVALID_SECOND_DB: &[u8] = b"ERR invalid second DB index";
/// CLIENT SETNAME with a space or newline.
pub const BAD_CLIENT_NAME: &[u8] =
    b"ERR Client names cannot contain spaces, newlines or special characters.";
/// HELLO with an unsupported version.
pub const NOPROTO: &[u8] = b"NOPROTO unsupported protocol version";
/// HELLO with a non-integer version.
pub const HELLO_VERSION_NOT_INTEGER: &[u8] =
    b"ERR Protocol version is not an integer or out of range";
/// AUTH or HELLO AUTH when no password is configured for that user.
pub const WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";
/// AUTH with no password configured.
pub const AUTH_NO_PASSWORD: &[u8] = b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
/// COMMAND GETKEYS of a command (or subcommand) the server lacks.
pub const GETKEYS_INVALID_COMMAND: &[u8] = b"ERR Invalid command specified";
/// COMMAND GETKEYS of a command without key arguments.
pub const GETKEYS_NO_KEYS: &[u8] = b"ERR The command has no key arguments";
/// COMMAND GETKEYS of a command with a wrong argument count.
pub const GETKEYS_ARITY: &[u8] = b"ERR Invalid number of arguments specified for command";
/// COMMAND GETKEYS of arguments that name no keys.
pub const GETKEYS_INVALID_ARGUMENTS: &[u8] = b"ERR Invalid arguments specified for command";

/// MULTI inside MULTI.
pub const MULTI_NESTED: &[u8] = b"ERR MULTI calls can not be nested";
/// WATCH between MULTI and EXEC.
pub const WATCH_INSIDE_MULTI: &[u8] = b"ERR WATCH inside MULTI is not allowed";
/// DISCARD outside MULTI.
pub const DISCARD_WITHOUT_MULTI: &[u8] = b"ERR DISCARD without MULTI";
/// EXEC outside MULTI.
pub const EXEC_WITHOUT_MULTI: &[u8] = b"ERR EXEC without MULTI";
/// EXEC after a command was rejected while queueing.
pub const EXECABORT_PREVIOUS_ERRORS: &[u8] =
    b"EXECABORT Transaction discarded because of previous errors.";
/// The start of EXEC's answer when EXEC itself is rejected; the reason follows.
const EXECABORT_BECAUSE_OF: &[u8] = b"EXECABORT Transaction discarded because of: ";

/// A queued command that cannot run where EXEC runs it (never queued; answered so that
/// EXEC's array keeps one reply per command).
pub const NOT_RUN: &[u8] = b"ERR internal error: a queued command could not run";

/// A string command would make a string longer than `proto-max-bulk-len`.
pub const STRING_TOO_BIG: &[u8] = b"ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// INCR, DECR, INCRBY, DECRBY past the range of a 64-bit integer.
pub const INCR_OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";
/// DECRBY of the smallest 64-bit integer, which cannot be negated.
pub const DECR_OVERFLOW: &[u8] = b"ERR decrement would overflow";
/// INCRBYFLOAT to an infinite result.
pub const INCR_NAN_OR_INFINITY: &[u8] = b"ERR increment would produce NaN or Infinity";
/// SETRANGE at a negative offset.
pub const OFFSET_OUT_OF_RANGE: &[u8] = b"ERR offset is out of range";

/// EXPIRE with NX and any of XX, GT, LT.
pub const EXPIRE_NX_AND_OTHERS: &[u8] =
    b"ERR NX and XX, GT or LT options at the same time are not compatible";
/// EXPIRE with both GT and LT.
pub const EXPIRE_GT_AND_LT: &[u8] = b"ERR GT and LT options at the same time are not compatible";
/// COPY of a key onto itself.
pub const SAME_OBJECT: &[u8] = b"ERR source and destination objects are the same";
/// OBJECT IDLETIME under an LFU eviction policy.
pub const LFU_NO_IDLETIME: &[u8] = b"ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// OBJECT FREQ without an LFU policy.
pub const NO_LFU_POLICY: &[u8] = b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// A blocking command's timeout that is not a number.
pub const TIMEOUT_NOT_FLOAT: &[u8] = b"ERR timeout is not a float or out of range";
/// A blocking command's negative timeout.
pub const TIMEOUT_NEGATIVE: &[u8] = b"ERR timeout is negative";
/// A millisecond timeout (XREAD BLOCK, GOBLIN.CLAIM BLOCK) that is not an integer.
pub const TIMEOUT_NOT_INTEGER: &[u8] = b"ERR timeout is not an integer or out of range";
/// DEBUG while `enable-debug-command` does not allow it.
pub const DEBUG_NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// MODULE LOAD, LOADEX or UNLOAD while `enable-module-command` does not allow it.
pub const MODULE_NOT_ALLOWED: &[u8] = b"ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
/// A millisecond timeout that overflows when added to the clock.
pub const TIMEOUT_OUT_OF_RANGE: &[u8] = b"ERR timeout is out of range";
/// CLIENT KILL MAXAGE with a value that is not an integer (Redis 7.4).
pub const MAXAGE_NOT_INTEGER: &[u8] = b"ERR maxage is not an integer or out of range";
/// CLIENT PAUSE with a mode other than WRITE or ALL.
pub const PAUSE_MODE: &[u8] = b"ERR CLIENT PAUSE mode must be WRITE or ALL";
/// CLIENT UNBLOCK with a reason other than TIMEOUT or ERROR.
pub const UNBLOCK_REASON: &[u8] = b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";
/// What a client blocked in a command gets when CLIENT UNBLOCK … ERROR unblocks it.
pub const UNBLOCKED: &[u8] = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// RENAME of a key that does not exist.
pub const NO_SUCH_KEY: &[u8] = b"ERR no such key";
/// SCAN with a cursor that is not an unsigned number.
pub const INVALID_CURSOR: &[u8] = b"ERR invalid cursor";

/// The prefix of a string as C's `%s` prints it: up to the first NUL.
pub fn c_str(s: &[u8]) -> &[u8] {
    s.iter().position(|&b| b == 0).map_or(s, |n| &s[..n])
}

/// C's `%.Ns`: at most `n` bytes, up to the first NUL.
fn c_str_max(s: &[u8], n: usize) -> &[u8] {
    let s = c_str(s);
    &s[..s.len().min(n)]
}

/// `ERR unknown command '<name>', with args beginning with: '<a>' '<b>' `, quoting
/// arguments until the list reaches 128 bytes, as Redis does.
pub fn unknown_command(args: &Args<'_>) -> Vec<u8> {
    let mut list = Vec::new();
    for i in 1..args.len() {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend_from_slice(c_str_max(args.get(i), room));
        list.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(c_str_max(args.get(0), 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&list);
    msg
}

/// `ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.`
pub fn unknown_subcommand(container: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut msg = b"ERR unknown subcommand '".to_vec();
    msg.extend_from_slice(c_str_max(sub, 128));
    msg.extend_from_slice(b"'. Try ");
    msg.extend(c_str(container).iter().map(u8::to_ascii_uppercase));
    msg.extend_from_slice(b" HELP.");
    msg
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CONTAINER>
/// HELP.` (Redis's `addReplySubcommandSyntaxError`, for a subcommand whose handler checks
/// its own argument count).
pub fn subcommand_syntax(container: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    msg.extend_from_slice(c_str_max(sub, 128));
    msg.extend_from_slice(b"'. Try ");
    msg.extend(c_str(container).iter().map(u8::to_ascii_uppercase));
    msg.extend_from_slice(b" HELP.");
    msg
}

/// A RESP2 client subscribed to channels sent another command than the Pub/Sub ones,
/// PING, QUIT and RESET.
pub fn not_while_subscribed(name: &str) -> Vec<u8> {
    format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT \
         / RESET are allowed in this context"
    )
    .into_bytes()
}

/// `ERR wrong number of arguments for '<name>' command`
pub fn wrong_arity(name: &str) -> Vec<u8> {
    format!("ERR wrong number of arguments for '{name}' command").into_bytes()
}

/// `ERR invalid expire time in '<name>' command`
pub fn invalid_expire(name: &str) -> ErrorReply {
    ErrorReply::Formatted(format!("ERR invalid expire time in '{name}' command").into_bytes())
}

/// `<prefix><arg><suffix>`, with `arg` as C's `%s` prints it.
fn formatted(prefix: &[u8], arg: &[u8], suffix: &[u8]) -> ErrorReply {
    let arg = c_str(arg);
    let mut msg = Vec::with_capacity(prefix.len() + arg.len() + suffix.len());
    msg.extend_from_slice(prefix);
    msg.extend_from_slice(arg);
    msg.extend_from_slice(suffix);
    ErrorReply::Formatted(msg)
}

/// `ERR Unsupported option <opt>` (EXPIRE's options).
pub fn unsupported_option(opt: &[u8]) -> ErrorReply {
    formatted(b"ERR Unsupported option ", opt, b"")
}

/// `ERR Syntax error in HELLO option '<opt>'`
pub fn hello_syntax(opt: &[u8]) -> ErrorReply {
    formatted(b"ERR Syntax error in HELLO option '", opt, b"'")
}

/// `ERR Unrecognized option '<opt>'` (CLIENT SETINFO's attribute).
pub fn unrecognized_option(opt: &[u8]) -> ErrorReply {
    formatted(b"ERR Unrecognized option '", opt, b"'")
}

/// `ERR <attr> cannot contain spaces, newlines or special characters.` (CLIENT SETINFO's
/// value).
pub fn bad_client_attr(attr: &[u8]) -> ErrorReply {
    formatted(
        b"ERR ",
        attr,
        b" cannot contain spaces, newlines or special characters.",
    )
}

/// EXEC's answer when EXEC itself is rejected with `reason`: `EXECABORT Transaction
/// discarded because of: <reason>`, without the reason's `ERR ` (`execCommandAbort`).
pub fn exec_abort(reason: &[u8]) -> ErrorReply {
    let reason = reason.strip_prefix(b"ERR ").unwrap_or(reason);
    let mut msg = EXECABORT_BECAUSE_OF.to_vec();
    msg.extend_from_slice(reason);
    ErrorReply::Formatted(msg)
}

/// Work on a key of a hash slot that the shard running it does not own (a routing fault:
/// the slot moved, or a bug); the shard refuses it rather than answer wrongly.
pub fn not_owned(slot: usize, shard: usize) -> Vec<u8> {
    format!("ERR internal error: hash slot {slot} is not served by thread {shard}; retry")
        .into_bytes()
}

/// A command whose keys span shards and that has no cross-shard plan (refused when the
/// command table is built; this answers it anyway).
pub fn no_plan(name: &str) -> Vec<u8> {
    format!("CROSSSLOT Keys in request don't hash to the same slot ('{name}' cannot span shards)")
        .into_bytes()
}

// --- sets

/// SPOP's count when it is not a non-negative integer (`getPositiveLongFromObjectOrReply`
/// without a message of its own).
pub const NOT_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
/// SRANDMEMBER's count of -2^63, whose negation does not fit (`getRangeLongFromObjectOrReply`
/// from -LONG_MAX to LONG_MAX).
pub const SRANDMEMBER_COUNT_RANGE: &[u8] =
    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// SRANDMEMBER asking for more repeated picks than Goblin answers (see
/// `families::RANDOM_PICKS_MAX`; Redis would stream them until its memory ran out). Worded
/// as Redis words its own bounds on a count.
pub const SRANDMEMBER_TOO_MANY: &[u8] =
    b"ERR value is out of range, value must between -16777216 and 9223372036854775807";
/// SINTERCARD's numkeys is not a positive integer.
pub const NUMKEYS_NOT_POSITIVE: &[u8] = b"ERR numkeys should be greater than 0";
/// SINTERCARD's numkeys is more than the arguments after it.
pub const NUMKEYS_TOO_MANY: &[u8] = b"ERR Number of keys can't be greater than number of args";
/// SINTERCARD's LIMIT is not a non-negative integer.
pub const LIMIT_NEGATIVE: &[u8] = b"ERR LIMIT can't be negative";
// --- hashes

/// HINCRBY of a field whose value is not an integer.
pub const HASH_VALUE_NOT_INTEGER: &[u8] = b"ERR hash value is not an integer";
/// HINCRBYFLOAT of a field whose value is not a float.
pub const HASH_VALUE_NOT_FLOAT: &[u8] = b"ERR hash value is not a float";
/// HINCRBYFLOAT by an infinite increment.
pub const VALUE_NAN_OR_INFINITY: &[u8] = b"ERR value is NaN or Infinity";
/// HRANDFIELD's count with WITHVALUES past half a `long` (its reply would have twice as
/// many elements), ZRANDMEMBER WITHSCORES likewise; also a negative count of HRANDFIELD
/// or ZRANDMEMBER whose reply Goblin refuses to build.
pub const VALUE_OUT_OF_RANGE: &[u8] = b"ERR value is out of range";
/// HRANDFIELD's count of the smallest `long`, which cannot be negated
/// (`getRangeLongFromObjectOrReply` between -LONG_MAX and LONG_MAX).
pub const COUNT_OUT_OF_RANGE: &[u8] =
    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
// --- lists

/// LPOP/RPOP with a count that is negative or not an integer.
pub const POP_COUNT_NOT_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
/// LSET at an index past either end.
pub const INDEX_OUT_OF_RANGE: &[u8] = b"ERR index out of range";
/// LPOS with RANK 0.
pub const LPOS_RANK_ZERO: &[u8] = b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
/// LPOS with a COUNT that is negative or not an integer.
pub const LPOS_COUNT_NEGATIVE: &[u8] = b"ERR COUNT can't be negative";
/// LPOS with a MAXLEN that is negative or not an integer.
pub const LPOS_MAXLEN_NEGATIVE: &[u8] = b"ERR MAXLEN can't be negative";
/// LMPOP (and BLMPOP) with a numkeys that is not a positive integer.
pub const LMPOP_NUMKEYS: &[u8] = b"ERR numkeys should be greater than 0";
/// LMPOP (and BLMPOP) with a COUNT that is not a positive integer.
pub const LMPOP_COUNT: &[u8] = b"ERR count should be greater than 0";
// --- sorted sets

/// ZADD with both NX and XX.
pub const ZADD_NX_AND_XX: &[u8] = b"ERR XX and NX options at the same time are not compatible";
/// ZADD with GT and LT, or either with NX.
pub const ZADD_GT_LT_NX: &[u8] =
    b"ERR GT, LT, and/or NX options at the same time are not compatible";
/// ZADD INCR with more than one score and member.
pub const ZADD_INCR_PAIRS: &[u8] = b"ERR INCR option supports a single increment-element pair";
/// ZADD INCR or ZINCRBY to a score that is not a number (`inf` plus `-inf`).
pub const ZSET_SCORE_NAN: &[u8] = b"ERR resulting score is not a number (NaN)";
/// A score range bound that is not a float.
pub const ZSET_MIN_MAX_NOT_FLOAT: &[u8] = b"ERR min or max is not a float";
/// A lex range bound that does not start with `(`, `[`, or is not `-` or `+`.
pub const ZSET_MIN_MAX_NOT_LEX: &[u8] = b"ERR min or max not valid string range item";
/// ZRANGE's LIMIT with a range by rank.
pub const ZRANGE_LIMIT_BY_RANK: &[u8] =
    b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
/// ZRANGE's WITHSCORES with BYLEX.
pub const ZRANGE_WITHSCORES_BYLEX: &[u8] =
    b"ERR syntax error, WITHSCORES not supported in combination with BYLEX";
/// ZUNION/ZINTER WEIGHTS with a weight that is not a float.
pub const ZSET_WEIGHT_NOT_FLOAT: &[u8] = b"ERR weight value is not a float";
/// ZINTERCARD's LIMIT below zero (or not an integer).
pub const ZSET_LIMIT_NEGATIVE: &[u8] = b"ERR LIMIT can't be negative";
/// ZMPOP's numkeys below 1 (or not an integer).
pub const ZSET_NUMKEYS_POSITIVE: &[u8] = b"ERR numkeys should be greater than 0";
/// ZMPOP's COUNT below 1 (or not an integer).
pub const ZSET_COUNT_POSITIVE: &[u8] = b"ERR count should be greater than 0";
/// ZPOPMIN/ZPOPMAX with a negative count (or not an integer).
pub const ZSET_MUST_BE_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";

/// `ERR at least 1 input key is needed for '<name>' command` (ZUNION, ZINTER, ZDIFF, their
/// STORE forms, ZINTERCARD with numkeys 0 or less).
pub fn zset_no_input_key(name: &str) -> ErrorReply {
    ErrorReply::Formatted(
        format!("ERR at least 1 input key is needed for '{name}' command").into_bytes(),
    )
}

/// A geo unit other than m, km, ft, mi.
pub const GEO_UNIT: &[u8] = b"ERR unsupported unit provided. please use M, KM, FT, MI";
/// A radius that is not a number.
pub const GEO_RADIUS_NOT_NUMERIC: &[u8] = b"ERR need numeric radius";
/// A negative radius.
pub const GEO_RADIUS_NEGATIVE: &[u8] = b"ERR radius cannot be negative";
/// BYBOX's width is not a number.
pub const GEO_WIDTH_NOT_NUMERIC: &[u8] = b"ERR need numeric width";
/// BYBOX's height is not a number.
pub const GEO_HEIGHT_NOT_NUMERIC: &[u8] = b"ERR need numeric height";
/// BYBOX with a negative width or height.
pub const GEO_BOX_NEGATIVE: &[u8] = b"ERR height or width cannot be negative";
/// A geo search's COUNT of zero or less.
pub const GEO_COUNT_NOT_POSITIVE: &[u8] = b"ERR COUNT must be > 0";
/// A search around a member the set does not hold.
pub const GEO_NO_MEMBER: &[u8] = b"ERR could not decode requested zset member";
/// GEORADIUS's STORE or STOREDIST with WITHDIST, WITHHASH or WITHCOORD.
pub const GEORADIUS_STORE_WITH: &[u8] = b"ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
/// GEOSEARCHSTORE with WITHDIST, WITHHASH or WITHCOORD.
pub const GEOSEARCHSTORE_WITH: &[u8] =
    b"ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
/// ANY without COUNT.
pub const GEO_ANY_WITHOUT_COUNT: &[u8] = b"ERR the ANY argument requires COUNT argument";
/// Goblin's own: GEORADIUS (or GEORADIUSBYMEMBER) whose last STORE or STOREDIST option,
/// the destination Redis writes, is not the key its key specs name (they find the
/// first of each): the command was routed and locked by another key.
pub const GEO_STORE_NOT_ROUTED: &[u8] = b"ERR the destination must be named by the first STORE or STOREDIST option: give one destination";

/// `ERR invalid longitude,latitude pair <lon>,<lat>`, each printed as C's `%f` prints it.
pub fn geo_invalid_pair(longitude: f64, latitude: f64) -> ErrorReply {
    ErrorReply::Formatted(
        format!("ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}").into_bytes(),
    )
}

/// GEOSEARCH or GEOSEARCHSTORE (named as the client wrote it) without FROMMEMBER or
/// FROMLONLAT.
pub fn geo_search_without_from(name: &[u8]) -> ErrorReply {
    let mut text = b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ".to_vec();
    text.extend_from_slice(c_str(name));
    ErrorReply::Formatted(text)
}

/// GEOSEARCH or GEOSEARCHSTORE (named as the client wrote it) without BYRADIUS or
/// BYBOX.
pub fn geo_search_without_by(name: &[u8]) -> ErrorReply {
    let mut text = b"ERR exactly one of BYRADIUS and BYBOX can be specified for ".to_vec();
    text.extend_from_slice(c_str(name));
    ErrorReply::Formatted(text)
}
/// A client from outside the loopback interface, in protected mode without a password.
pub const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// A script runs past `busy-reply-threshold`.
pub const BUSY_SCRIPT: &[u8] =
    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same, while the busy script is a function (FCALL).
pub const BUSY_FUNCTION: &[u8] =
    b"BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// A command that may grow memory, while memory is over `maxmemory` and eviction could
/// not bring it back.
pub const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";

/// SLOWLOG GET's count below -1 (or not a number).
pub const SLOWLOG_COUNT: &[u8] = b"ERR count should be greater than or equal to -1";

/// A connection beyond `maxclients`.
pub const MAX_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";

/// A command before AUTH, with `requirepass` set.
pub const NOAUTH: &[u8] = b"NOAUTH Authentication required.";

/// HELLO without AUTH before AUTH, with `requirepass` set.
pub const NOAUTH_HELLO: &[u8] = b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

/// A command without the `loading` flag while the dataset loads.
pub const LOADING: &[u8] = b"LOADING Redis is loading the dataset in memory";

/// A write while snapshots fail (`stop-writes-on-bgsave-error`).
pub const MISCONF_RDB: &[u8] = b"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// A write while the append-only log cannot be written.
pub fn misconf_aof(reason: &str) -> Vec<u8> {
    format!("MISCONF Errors writing to the AOF file: {reason}").into_bytes()
}

/// SAVE or BGSAVE while one runs.
pub const BGSAVE_IN_PROGRESS: &[u8] = b"ERR Background save already in progress";

/// BGREWRITEAOF while one runs.
pub const BGREWRITEAOF_IN_PROGRESS: &[u8] =
    b"ERR Background append only file rewriting already in progress";

/// SHUTDOWN whose save failed.
pub const SHUTDOWN_FAILED: &[u8] = b"ERR Errors trying to SHUTDOWN. Check logs.";

/// BGSAVE while a log rewrite runs.
pub const BGSAVE_WHILE_REWRITING: &[u8] = b"ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";

/// `<prefix>'<name>'`, the name cut at a NUL as C's `%s` would.
fn quoted(prefix: &[u8], name: &[u8]) -> ErrorReply {
    let mut text = prefix.to_vec();
    text.push(b'\'');
    text.extend_from_slice(c_str(name));
    text.push(b'\'');
    ErrorReply::Formatted(text)
}

/// CLIENT LIST/KILL with a TYPE that is not one.
pub fn unknown_client_type(name: &[u8]) -> ErrorReply {
    quoted(b"ERR Unknown client type ", name)
}

/// CLIENT LIST ID with an id that is not an integer.
pub const INVALID_CLIENT_ID: &[u8] = b"ERR Invalid client ID";

/// CLIENT KILL ID below 1.
pub const CLIENT_ID_NOT_POSITIVE: &[u8] = b"ERR client-id should be greater than 0";

/// CLIENT KILL USER of a user that does not exist.
pub fn no_such_user(name: &[u8]) -> ErrorReply {
    quoted(b"ERR No such user ", name)
}

/// CLIENT KILL addr:port that matched no client.
pub const NO_SUCH_CLIENT: &[u8] = b"ERR No such client";

/// CONFIG SET with an option it does not know.
pub fn config_unknown(name: &str) -> ErrorReply {
    ErrorReply::Formatted(
        format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'").into_bytes(),
    )
}

/// CONFIG SET refusing a value (or a fixed option), with the reason.
pub fn config_set_failed(name: &str, reason: &str) -> ErrorReply {
    ErrorReply::Formatted(
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
            .into_bytes(),
    )
}

/// CONFIG REWRITE when the server started without a configuration file.
pub const CONFIG_REWRITE_NO_FILE: &[u8] = b"ERR The server is running without a config file";

/// CONFIG REWRITE that could not read or replace the file, with the reason (`strerror`'s
/// words).
pub fn config_rewrite_failed(reason: &str) -> ErrorReply {
    ErrorReply::Formatted(format!("ERR Rewriting config file: {reason}").into_bytes())
}

/// A string that is not a HyperLogLog, given to a HyperLogLog command.
pub const HLL_WRONGTYPE: &[u8] = b"WRONGTYPE Key is not a valid HyperLogLog string value.";
/// A HyperLogLog whose sparse registers cannot be read.
pub const HLL_INVALID: &[u8] = b"INVALIDOBJ Corrupted HLL object detected";
/// PFDEBUG of a missing key.
pub const PFDEBUG_NO_KEY: &[u8] = b"ERR The specified key does not exist";
/// PFDEBUG DECODE of a dense HyperLogLog.
pub const PFDEBUG_NOT_SPARSE: &[u8] = b"ERR HLL encoding is not sparse";

/// `ERR Unknown PFDEBUG subcommand '<sub>'`
pub fn pfdebug_unknown(sub: &[u8]) -> ErrorReply {
    let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
    msg.extend_from_slice(c_str(sub));
    msg.push(b'\'');
    ErrorReply::Formatted(msg)
}

/// A replica whose own link is down, asked for a sync by its replica.
pub const NO_MASTER_LINK: &[u8] = b"NOMASTERLINK Can't SYNC while not connected with my master";
