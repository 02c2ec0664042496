//! Geo commands on the sorted-set type, as redis-server 7.0.15 has them (`geo.c`):
//! GEOADD (NX, XX, CH), GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUS_RO, GEORADIUSBYMEMBER and GEORADIUSBYMEMBER_RO.
//!
//! A point is a member whose score is its 52-bit geohash ([`geohash`]); GEOADD turns its
//! coordinates into scores and adds them as ZADD does (the same code: encodings, `zadd`
//! notifications, WATCH), so geo sets are sorted sets to every other command. Coordinates
//! read back are the centres of the members' cells, distances are Redis's haversine, and
//! both are printed as Redis prints them (`%.17Lf` trimmed; four decimals).
//!
//! **Searches** parse their options in one pass, checking as they go, exactly where
//! `georadiusGeneric` does — a FROMMEMBER is looked up when it is read, so the errors
//! come in Redis's order. They scan the nine cells around the centre in Redis's order
//! (the centre's cell, north, south, east, west, north-east, north-west, south-east,
//! south-west), each as a score range in set order, so unsorted results come out as
//! Redis's; ASC and DESC sort as Redis does (glibc's merge sort, or Redis's partial
//! quicksort under COUNT: [`sort`]), ties included.
//!
//! **Across shards.** GEOSEARCHSTORE and the GEORADIUS commands with STORE or STOREDIST
//! name a source and a destination: when they live on different shards, a plan searches
//! at the source and then writes the destination ([`StorePlan`]), under the locks of
//! both, logging the write as its effect (`DEL` and a `ZADD`).
//!
//! **One deliberate difference.** Redis writes a GEORADIUS's *last* STORE or STOREDIST
//! key, while its key specs (COMMAND GETKEYS, routing, locks) name the *first* of each; a
//! command whose destination is not one of those (`STORE a STORE b`) is refused
//! ([`errors::GEO_STORE_NOT_ROUTED`]) rather than write a key it was not routed by, or
//! locked for writing.

mod geohash;
mod sort;

use std::cmp::Ordering;

use goblin_protocol::{Encoder, Version, parse_i64};
use goblin_store::types::zset::ScoreRange;
use goblin_store::{Keyspace, Millis, SortedSet, ValueRef};

use crate::errors::{self, ErrorReply};
use crate::longdouble::LongDouble;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step, encoded};

use self::geohash::{Extent, LAT_MAX, LAT_MIN, LONG_MAX, LONG_MIN, Shape};
use super::sorted_sets::{parse_score, store_part, zadd_generic};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::GEOADD, Exec::Shard(geoadd));
    table.add(&meta::GEODIST, Exec::Shard(geodist));
    table.add(&meta::GEOHASH, Exec::Shard(geohash_command));
    table.add(&meta::GEOPOS, Exec::Shard(geopos));
    table
        .add(&meta::GEORADIUS, Exec::Shard(georadius))
        .cross_shard(georadius_plan, Locking::Keys);
    table.add(&meta::GEORADIUS_RO, Exec::Shard(georadius_ro));
    table
        .add(&meta::GEORADIUSBYMEMBER, Exec::Shard(georadiusbymember))
        .cross_shard(georadiusbymember_plan, Locking::Keys);
    table.add(
        &meta::GEORADIUSBYMEMBER_RO,
        Exec::Shard(georadiusbymember_ro),
    );
    table.add(&meta::GEOSEARCH, Exec::Shard(geosearch));
    table
        .add(&meta::GEOSEARCHSTORE, Exec::Shard(geosearchstore))
        .cross_shard(geosearchstore_plan, Locking::Keys);
}

// --- arguments ---

/// A unit's meters (`extractUnitOrReply`).
fn parse_unit(unit: &[u8]) -> Result<f64, ErrorReply> {
    if is_keyword(unit, "m") {
        Ok(1.0)
    } else if is_keyword(unit, "km") {
        Ok(1000.0)
    } else if is_keyword(unit, "ft") {
        Ok(0.3048)
    } else if is_keyword(unit, "mi") {
        Ok(1609.34)
    } else {
        Err(errors::GEO_UNIT.into())
    }
}

/// A longitude and a latitude within Redis's limits (`extractLongLatOrReply`): both are
/// read before either is checked.
fn parse_lonlat(longitude: &[u8], latitude: &[u8]) -> Result<[f64; 2], ErrorReply> {
    let lon = parse_score(longitude).ok_or(ErrorReply::Fixed(errors::NOT_FLOAT))?;
    let lat = parse_score(latitude).ok_or(ErrorReply::Fixed(errors::NOT_FLOAT))?;
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(errors::geo_invalid_pair(lon, lat));
    }
    Ok([lon, lat])
}

/// A radius and its unit (`extractDistanceOrReply`): the radius in the unit, and the
/// unit's meters.
fn parse_radius(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), ErrorReply> {
    let r = parse_score(radius).ok_or(ErrorReply::Fixed(errors::GEO_RADIUS_NOT_NUMERIC))?;
    if r < 0.0 {
        return Err(errors::GEO_RADIUS_NEGATIVE.into());
    }
    Ok((r, parse_unit(unit)?))
}

/// A box's width, height and unit (`extractBoxOrReply`): the extent in the unit, and the
/// unit's meters.
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(Extent, f64), ErrorReply> {
    let w = parse_score(width).ok_or(ErrorReply::Fixed(errors::GEO_WIDTH_NOT_NUMERIC))?;
    let h = parse_score(height).ok_or(ErrorReply::Fixed(errors::GEO_HEIGHT_NOT_NUMERIC))?;
    if h < 0.0 || w < 0.0 {
        return Err(errors::GEO_BOX_NEGATIVE.into());
    }
    let extent = Extent::Box {
        width: w,
        height: h,
    };
    Ok((extent, parse_unit(unit)?))
}

// --- lookups and replies ---

/// The sorted set at `key`: `Ok(None)` when there is none.
fn lookup<'a>(
    db: &'a mut Keyspace,
    key: &[u8],
    now: Millis,
) -> Result<Option<&'a SortedSet>, ErrorReply> {
    match db.get(key, now).map(|e| e.value()) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(errors::WRONGTYPE.into()),
    }
}

/// The point `member` stands for, if the set holds it (`longLatFromMember`).
fn member_point(z: &SortedSet, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).map(geohash::decode_score)
}

/// A coordinate as `addReplyHumanLongDouble` sends it: `%.17Lf` with trailing zeros
/// trimmed; a bulk string in RESP2, a double in RESP3.
fn reply_coordinate(out: &mut Encoder<'_>, v: f64) {
    let text = LongDouble::from_f64(v).to_human();
    match out.version() {
        Version::Resp2 => out.bulk(text.as_bytes()),
        Version::Resp3 => {
            out.raw(b",");
            out.raw(text.as_bytes());
            out.raw(b"\r\n");
        }
    }
}

/// C's `llrint` on x86-64 (`cvtsd2si`): to nearest, ties to even; `i64::MIN` for NaN and
/// anything outside the range.
fn llrint(d: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let r = d.round_ties_even();
    // NaN is in no range.
    if !(-TWO_63..TWO_63).contains(&r) {
        i64::MIN
    } else {
        r as i64
    }
}

/// A distance as `addReplyDoubleDistance` writes it (`fixedpoint_d2string` with four
/// decimals): the value times 10⁴ rounded to an integer, with the point put back.
fn distance_text(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = llrint(d * 10_000.0);
    let sign = if scaled < 0 { "-" } else { "" };
    let v = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", v / 10_000, v % 10_000)
}

/// A distance reply: always a bulk string.
fn reply_distance(out: &mut Encoder<'_>, d: f64) {
    out.bulk(distance_text(d).as_bytes());
}

// --- GEOADD, GEODIST, GEOHASH, GEOPOS ---

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: every pair is checked and
/// turned into its score, then the command runs as `ZADD key [options] score member …`
/// (Redis rewrites it so and calls ZADD).
fn geoadd(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let (mut nx, mut xx) = (false, false);
    let mut longidx = 2;
    while longidx < args.len() {
        let opt = args.get(longidx);
        if is_keyword(opt, "nx") {
            nx = true;
        } else if is_keyword(opt, "xx") {
            xx = true;
        } else if !is_keyword(opt, "ch") {
            break;
        }
        longidx += 1;
    }
    if !(args.len() - longidx).is_multiple_of(3) || (xx && nx) {
        return ctx.out.error(errors::SYNTAX);
    }
    let elements = (args.len() - longidx) / 3;
    let mut argv: Vec<Vec<u8>> = Vec::with_capacity(longidx + 2 * elements);
    argv.push(b"zadd".to_vec());
    argv.extend(args.iter_from(1).take(longidx - 1).map(<[u8]>::to_vec));
    for i in 0..elements {
        let at = longidx + 3 * i;
        let xy = match parse_lonlat(args.get(at), args.get(at + 1)) {
            Ok(xy) => xy,
            Err(e) => return e.send(&mut ctx.out),
        };
        // Within the limits the point always encodes.
        let score = geohash::score_of(xy[0], xy[1]).unwrap_or(0);
        argv.push(itoa::Buffer::new().format(score).as_bytes().to_vec());
        argv.push(args.get(at + 2).to_vec());
    }
    Args::with_owned(&argv, |zadd| zadd_generic(ctx, zadd, false));
}

/// `GEODIST key member1 member2 [unit]`: nil when the key or either member is missing.
fn geodist(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let to_meters = match args.len() {
        5 => match parse_unit(args.get(4)) {
            Ok(m) => m,
            Err(e) => return e.send(&mut ctx.out),
        },
        n if n > 5 => return ctx.out.error(errors::SYNTAX),
        _ => 1.0,
    };
    let z = match lookup(ctx.db, args.get(1), ctx.now) {
        Err(e) => return e.send(&mut ctx.out),
        Ok(None) => return ctx.out.null(),
        Ok(Some(z)) => z,
    };
    match (member_point(z, args.get(2)), member_point(z, args.get(3))) {
        (Some([x1, y1]), Some([x2, y2])) => {
            let d = geohash::distance(x1, y1, x2, y2) / to_meters;
            reply_distance(&mut ctx.out, d);
        }
        _ => ctx.out.null(),
    }
}

/// `GEOHASH key member [...]`: each member's 11-character standard geohash, nil for a
/// missing one.
fn geohash_command(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let z = match lookup(ctx.db, args.get(1), ctx.now) {
        Err(e) => return e.send(&mut ctx.out),
        Ok(z) => z,
    };
    ctx.out.array(args.len() - 2);
    for member in args.iter_from(2) {
        match z.and_then(|z| member_point(z, member)) {
            Some([lon, lat]) => ctx.out.bulk(&geohash::standard_geohash(lon, lat)),
            None => ctx.out.null(),
        }
    }
}

/// `GEOPOS key member [...]`: each member's longitude and latitude, a nil array for a
/// missing one.
fn geopos(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let z = match lookup(ctx.db, args.get(1), ctx.now) {
        Err(e) => return e.send(&mut ctx.out),
        Ok(z) => z,
    };
    ctx.out.array(args.len() - 2);
    for member in args.iter_from(2) {
        match z.and_then(|z| member_point(z, member)) {
            Some([lon, lat]) => {
                ctx.out.array(2);
                reply_coordinate(&mut ctx.out, lon);
                reply_coordinate(&mut ctx.out, lat);
            }
            None => ctx.out.null_array(),
        }
    }
}

// --- searches ---

/// The search commands, by how they read their arguments (`georadiusGeneric`'s flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS: around coordinates; STORE and STOREDIST accepted.
    Radius,
    /// GEORADIUS_RO.
    RadiusRo,
    /// GEORADIUSBYMEMBER: around a member; STORE and STOREDIST accepted.
    Member,
    /// GEORADIUSBYMEMBER_RO.
    MemberRo,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE: its destination is argument 1, its source argument 2.
    SearchStore,
}

impl Kind {
    /// The source key's argument.
    fn source(self) -> usize {
        if self == Kind::SearchStore { 2 } else { 1 }
    }

    /// GEOSEARCH or GEOSEARCHSTORE.
    fn is_search(self) -> bool {
        matches!(self, Kind::Search | Kind::SearchStore)
    }

    /// Accepts STORE and STOREDIST with a key (GEORADIUS, GEORADIUSBYMEMBER).
    fn stores(self) -> bool {
        matches!(self, Kind::Radius | Kind::Member)
    }
}

/// How results are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sort {
    /// In the order the scan finds them.
    None,
    /// Nearest first.
    Asc,
    /// Farthest first.
    Desc,
}

/// A match.
#[derive(Debug)]
struct Point {
    longitude: f64,
    latitude: f64,
    /// From the centre: in meters while searching, in the search's unit once chosen.
    dist: f64,
    score: f64,
    member: Vec<u8>,
}

/// Redis's `sort_gp_asc`: by distance, with NaN (never equal, never greater) before
/// anything — and everything before NaN: an inconsistent order, which the sorts follow
/// as Redis's do.
fn nearer(a: &Point, b: &Point) -> Ordering {
    if a.dist > b.dist {
        Ordering::Greater
    } else if a.dist == b.dist {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

/// Results to reply, with the options that shape each.
#[derive(Debug)]
struct Found {
    points: Vec<Point>,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
}

impl Found {
    /// The reply: members, or per member an array of the member and what the options
    /// ask for (distance, hash, coordinates — in that order).
    fn send(&self, out: &mut Encoder<'_>) {
        let options =
            usize::from(self.withdist) + usize::from(self.withhash) + usize::from(self.withcoord);
        out.array(self.points.len());
        for p in &self.points {
            if options > 0 {
                out.array(options + 1);
            }
            out.bulk(&p.member);
            if self.withdist {
                reply_distance(out, p.dist);
            }
            if self.withhash {
                out.integer(geohash::c_double_to_i64(p.score));
            }
            if self.withcoord {
                out.array(2);
                reply_coordinate(out, p.longitude);
                reply_coordinate(out, p.latitude);
            }
        }
    }
}

/// What a search decided, before anything is written.
#[derive(Debug)]
enum Searched {
    /// Results for the client.
    Reply(Found),
    /// Elements for the destination, argument `dest` (none: it is deleted).
    Store {
        dest: usize,
        elements: Vec<(Vec<u8>, f64)>,
    },
}

/// Whether `dest`, the destination a GEORADIUS parse chose, is a key the command was
/// routed by and locked for writing: one its specs name as a destination — after the
/// first STORE or the first STOREDIST found from the options' start, the last argument
/// never looked at (`getKeysUsingKeySpecs`'s keyword search). (The source, also named
/// by the specs, is locked only for reading.)
fn routed(args: &Args<'_>, from: usize, dest: &[u8]) -> bool {
    let after = |keyword: &str| {
        (from..args.len().saturating_sub(1))
            .find(|&i| is_keyword(args.get(i), keyword))
            .map(|i| args.get(i + 1))
    };
    after("STORE") == Some(dest) || after("STOREDIST") == Some(dest)
}

/// `georadiusGeneric`: parses and checks the arguments in Redis's order, then searches
/// the source. Nothing is written here.
fn search(
    db: &mut Keyspace,
    now: Millis,
    args: &Args<'_>,
    kind: Kind,
) -> Result<Searched, ErrorReply> {
    let z = lookup(db, args.get(kind.source()), now)?;
    let mut xy = [0.0; 2];
    let mut extent = Extent::Radius(0.0);
    let mut conversion = 1.0;
    let mut store: Option<usize> = None;
    let mut storedist = false;
    let base = match kind {
        Kind::Radius | Kind::RadiusRo => {
            xy = parse_lonlat(args.get(2), args.get(3))?;
            let (r, c) = parse_radius(args.get(4), args.get(5))?;
            (extent, conversion) = (Extent::Radius(r), c);
            6
        }
        // Without a source the member and radius are not read: the options still are,
        // to know which empty reply to give.
        Kind::Member | Kind::MemberRo => {
            if let Some(z) = z {
                xy =
                    member_point(z, args.get(2)).ok_or(ErrorReply::Fixed(errors::GEO_NO_MEMBER))?;
                let (r, c) = parse_radius(args.get(3), args.get(4))?;
                (extent, conversion) = (Extent::Radius(r), c);
            }
            5
        }
        Kind::Search => 2,
        Kind::SearchStore => {
            store = Some(1);
            3
        }
    };
    let (mut withdist, mut withhash, mut withcoord) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: u64 = 0;
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let is = |word: &str| is_keyword(args.get(at), word);
        if is("withdist") {
            withdist = true;
        } else if is("withhash") {
            withhash = true;
        } else if is("withcoord") {
            withcoord = true;
        } else if is("any") {
            any = true;
        } else if is("asc") {
            sort = Sort::Asc;
        } else if is("desc") {
            sort = Sort::Desc;
        } else if is("count") && i + 1 < remaining {
            let n = parse_i64(args.get(at + 1)).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
            if n <= 0 {
                return Err(errors::GEO_COUNT_NOT_POSITIVE.into());
            }
            count = n as u64;
            i += 1;
        } else if (is("store") || is("storedist")) && i + 1 < remaining && kind.stores() {
            store = Some(at + 1);
            storedist = is("storedist");
            i += 1;
        } else if is("storedist") && kind == Kind::SearchStore {
            storedist = true;
        } else if is("frommember") && i + 1 < remaining && kind.is_search() && !fromloc {
            // Without a source the member is not looked up: the error for that comes
            // once the options are read.
            if let Some(z) = z {
                xy = member_point(z, args.get(at + 1))
                    .ok_or(ErrorReply::Fixed(errors::GEO_NO_MEMBER))?;
            }
            frommember = true;
            i += 1;
        } else if is("fromlonlat") && i + 2 < remaining && kind.is_search() && !frommember {
            xy = parse_lonlat(args.get(at + 1), args.get(at + 2))?;
            fromloc = true;
            i += 2;
        } else if is("byradius") && i + 2 < remaining && kind.is_search() && !bybox {
            let (r, c) = parse_radius(args.get(at + 1), args.get(at + 2))?;
            (extent, conversion) = (Extent::Radius(r), c);
            byradius = true;
            i += 2;
        } else if is("bybox") && i + 3 < remaining && kind.is_search() && !byradius {
            (extent, conversion) = parse_box(args.get(at + 1), args.get(at + 2), args.get(at + 3))?;
            bybox = true;
            i += 3;
        } else {
            return Err(errors::SYNTAX.into());
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return Err(if kind == Kind::SearchStore {
            errors::GEOSEARCHSTORE_WITH
        } else {
            errors::GEORADIUS_STORE_WITH
        }
        .into());
    }
    if kind.is_search() && !(frommember || fromloc) {
        return Err(errors::geo_search_without_from(args.get(0)));
    }
    if kind.is_search() && !(byradius || bybox) {
        return Err(errors::geo_search_without_by(args.get(0)));
    }
    if any && count == 0 {
        return Err(errors::GEO_ANY_WITHOUT_COUNT.into());
    }
    if let Some(dest) = store
        && kind.stores()
        && !routed(args, base, args.get(dest))
    {
        return Err(errors::GEO_STORE_NOT_ROUTED.into());
    }
    let Some(z) = z else {
        return Ok(match store {
            Some(dest) => Searched::Store {
                dest,
                elements: Vec::new(),
            },
            None => Searched::Reply(Found {
                points: Vec::new(),
                withdist,
                withhash,
                withcoord,
            }),
        });
    };
    // COUNT without ANY returns the nearest: it sorts.
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = Shape {
        xy,
        conversion,
        extent,
    };
    let mut points = scan(z, &shape, if any { count } else { 0 });
    let found = points.len() as u64;
    let returned = if count == 0 || found < count {
        found
    } else {
        count
    };
    let desc = |a: &Point, b: &Point| nearer(a, b).reverse();
    match (sort, returned == found) {
        (Sort::None, _) => {}
        (Sort::Asc, true) => sort::merge_sort(&mut points, nearer),
        (Sort::Desc, true) => sort::merge_sort(&mut points, desc),
        (Sort::Asc, false) => {
            sort::partial_quicksort(&mut points, nearer, 0, returned as usize - 1)
        }
        (Sort::Desc, false) => sort::partial_quicksort(&mut points, desc, 0, returned as usize - 1),
    }
    points.truncate(returned as usize);
    for p in &mut points {
        p.dist /= conversion;
    }
    Ok(match store {
        Some(dest) => Searched::Store {
            dest,
            elements: points
                .into_iter()
                .map(|p| (p.member, if storedist { p.dist } else { p.score }))
                .collect(),
        },
        None => Searched::Reply(Found {
            points,
            withdist,
            withhash,
            withcoord,
        }),
    })
}

/// The members of `z` within `shape`, cell after cell in Redis's order, each cell's in
/// set order (`membersOfAllNeighbors`); with a `limit` (ANY), no more once that many
/// are found.
fn scan(z: &SortedSet, shape: &Shape, limit: u64) -> Vec<Point> {
    let mut points = Vec::new();
    let enough = |points: &Vec<Point>| limit != 0 && points.len() as u64 >= limit;
    for cell in shape.cells() {
        if enough(&points) {
            break;
        }
        let (min, max) = cell.score_range();
        let range = ScoreRange {
            min: min as f64,
            max: max as f64,
            min_ex: false,
            max_ex: true,
        };
        let mut at = z.first_in_score_range(&range);
        while let Some(pos) = at {
            let (member, score) = z.entry(pos);
            if !range.lte_max(score) {
                break;
            }
            let xy = geohash::decode_score(score);
            if let Some(dist) = shape.distance_within(xy) {
                points.push(Point {
                    longitude: xy[0],
                    latitude: xy[1],
                    dist,
                    score,
                    member: member.to_vec(),
                });
            }
            if enough(&points) {
                break;
            }
            at = z.next(pos);
        }
    }
    points
}

/// A STORE's destination set: the skiplist Redis fills, turned into a listpack when it is
/// small enough. (Redis would abort on a member found twice, or on a NaN distance —
/// antipodes under STOREDIST; such elements are left out.)
fn destination(mut elements: Vec<(Vec<u8>, f64)>) -> SortedSet {
    elements.retain(|(_, score)| !score.is_nan());
    elements.sort_by(|a, b| a.0.cmp(&b.0));
    elements.dedup_by(|a, b| a.0 == b.0);
    SortedSet::from_entries(elements)
}

/// Runs a search whose keys are on this shard.
fn search_here(ctx: &mut ShardCtx<'_>, args: &Args<'_>, kind: Kind) {
    match search(ctx.db, ctx.now, args, kind) {
        Err(e) => e.send(&mut ctx.out),
        Ok(Searched::Reply(found)) => found.send(&mut ctx.out),
        Ok(Searched::Store { dest, elements }) => {
            let n = store_part(ctx, args.get(dest), destination(elements), false);
            ctx.out.integer(n as i64);
        }
    }
}

/// `GEORADIUS key longitude latitude radius unit [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]`
fn georadius(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::Radius);
}

/// `GEORADIUS_RO`: GEORADIUS without STORE.
fn georadius_ro(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::RadiusRo);
}

/// `GEORADIUSBYMEMBER key member radius unit …`: GEORADIUS around a member.
fn georadiusbymember(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::Member);
}

/// `GEORADIUSBYMEMBER_RO`: GEORADIUSBYMEMBER without STORE.
fn georadiusbymember_ro(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::MemberRo);
}

/// `GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius
/// unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST]
/// [WITHHASH]`
fn geosearch(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::Search);
}

/// `GEOSEARCHSTORE destination source … [STOREDIST]`: GEOSEARCH's results stored as a
/// sorted set (scored by geohash, or by distance with STOREDIST).
fn geosearchstore(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    search_here(ctx, args, Kind::SearchStore);
}

/// What a search at the source gives a [`StorePlan`].
#[derive(Debug)]
enum SourceOut {
    /// The client's reply, encoded: an error, or results the command did not store.
    Reply(Vec<u8>),
    /// What to write at `dest`.
    Store { dest: Vec<u8>, z: SortedSet },
}

/// A search whose source and destination are on different shards: the search runs at
/// the source (which checks every argument), then the destination's shard stores the
/// results — or deletes the destination when there are none.
#[derive(Debug)]
struct StorePlan {
    args: Vec<Vec<u8>>,
    kind: Kind,
    source_shard: usize,
    /// The destination's size, once its write is sent.
    stored: Option<usize>,
}

impl Plan for StorePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if let Some(n) = self.stored {
            return cx.done(|e| e.integer(n as i64));
        }
        let Some(result) = results.into_iter().next() else {
            let (args, kind, resp) = (self.args.clone(), self.kind, cx.resp);
            return Step::Hops(vec![Hop::run(self.source_shard, move |ctx| {
                let out = Args::with_owned(&args, |a| match search(ctx.db, ctx.now, a, kind) {
                    Err(e) => SourceOut::Reply(encoded(resp, |enc| e.send(enc))),
                    Ok(Searched::Reply(found)) => {
                        SourceOut::Reply(encoded(resp, |enc| found.send(enc)))
                    }
                    Ok(Searched::Store { dest, elements }) => SourceOut::Store {
                        dest: a.get(dest).to_vec(),
                        z: destination(elements),
                    },
                });
                HopOut::Other(Box::new(out))
            })]);
        };
        let out = match result {
            HopOut::Other(any) => any.downcast::<SourceOut>().ok().map(|b| *b),
            _ => None,
        };
        match out {
            Some(SourceOut::Reply(reply)) => Step::Done(Outcome::Reply(reply)),
            Some(SourceOut::Store { dest, z }) => {
                self.stored = Some(z.len());
                let shard = cx.slots.shard_of_key(&dest);
                Step::Hops(vec![Hop::run(shard, move |ctx| {
                    store_part(ctx, &dest, z, true);
                    HopOut::Done
                })])
            }
            None => cx.done(|e| e.error(errors::NOT_RUN)),
        }
    }
}

/// The plan of a search with a source and a destination.
fn store_plan(start: &PlanStart<'_>, kind: Kind) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    Ok(Box::new(StorePlan {
        args: args.iter_from(0).map(<[u8]>::to_vec).collect(),
        kind,
        source_shard: start.slots.shard_of_key(args.get(kind.source())),
        stored: None,
    }))
}

fn georadius_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    store_plan(start, Kind::Radius)
}

fn georadiusbymember_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    store_plan(start, Kind::Member)
}

fn geosearchstore_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    store_plan(start, Kind::SearchStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_with_four_decimals() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(-0.0), "0.0000");
        assert_eq!(distance_text(166_274.151_6), "166274.1516");
        assert_eq!(distance_text(0.000_05), "0.0000");
        assert_eq!(distance_text(0.000_150_000_1), "0.0002");
        assert_eq!(distance_text(12.5), "12.5000");
        assert_eq!(distance_text(f64::NAN), "-922337203685477.5808");
        assert_eq!(distance_text(1e300), "-922337203685477.5808");
    }

    /// `%f`'s digits: exact, ties to even, the sign of zero kept.
    #[test]
    fn invalid_pairs_print_as_c_does() {
        let text = |lon, lat| errors::geo_invalid_pair(lon, lat).as_bytes().to_vec();
        assert_eq!(
            text(181.0, 0.0),
            b"ERR invalid longitude,latitude pair 181.000000,0.000000"
        );
        assert_eq!(
            text(-0.0, 100.0),
            b"ERR invalid longitude,latitude pair -0.000000,100.000000"
        );
        assert_eq!(
            text(0.0078125, 100.0),
            b"ERR invalid longitude,latitude pair 0.007812,100.000000"
        );
        assert_eq!(
            text(f64::INFINITY, 0.0),
            b"ERR invalid longitude,latitude pair inf,0.000000"
        );
    }

    #[test]
    fn a_destination_must_be_one_the_specs_name() {
        let check = |line: &str, from: usize| {
            let words: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
            Args::with_owned(&words, |a| {
                let dest = (from..a.len() - 1)
                    .rev()
                    .find(|&i| is_keyword(a.get(i), "store") || is_keyword(a.get(i), "storedist"))
                    .map_or(&b""[..], |i| a.get(i + 1));
                routed(a, from, dest)
            })
        };
        assert!(check("GEORADIUS s 0 0 1 m STORE d", 6));
        assert!(check("GEORADIUS s 0 0 1 m STORE a STOREDIST b", 6));
        assert!(check("GEORADIUS s 0 0 1 m STOREDIST a STORE b", 6));
        assert!(check("GEORADIUS s 0 0 1 m STORE a STORE a", 6));
        assert!(!check("GEORADIUS s 0 0 1 m STORE a STORE b", 6));
        assert!(!check("GEORADIUS s 0 0 1 m STOREDIST a STOREDIST b", 6));
        assert!(check("GEORADIUSBYMEMBER s m 1 m STOREDIST d", 5));
        assert!(check("GEORADIUS s 0 0 1 m STOREDIST d STORE s", 6));
        assert!(!check("GEORADIUS s 0 0 1 m STORE d STORE s", 6));
    }
}
