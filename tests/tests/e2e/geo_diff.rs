//! The geo commands — GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE,
//! GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER, GEORADIUSBYMEMBER_RO — differentially
//! against redis-server 7.0, with `--threads 1` and 4, in RESP2 and RESP3: every option
//! and every error in Redis's order of checks, the Redis docs' Sicily, coordinates at the
//! limits and scores that are no geohash, the scores of geo sets (ZRANGE WITHSCORES),
//! results in Redis's unsorted order and its order of ties, BYBOX, COUNT and ANY, the
//! STORE forms with their keys on one shard and on two; then seeded random points and
//! searches.

use goblin_tests::diff::{Differential, for_each_thread_count, script, script_everywhere};
use goblin_tests::keys::Layout;
use goblin_tests::rng::{Rng, seeds};
use goblin_tests::{Server, show};

/// Switches both connections of `d` to RESP3 (HELLO's reply names the server: it is not
/// compared).
fn resp3(d: &mut Differential) {
    for raw in [&mut d.g, &mut d.r] {
        let reply = raw.cmd(&[b"HELLO", b"3"]);
        assert!(reply.starts_with(b"%"), "HELLO 3: {}", show(&reply));
    }
}

/// Runs `text` with each thread count, in RESP2 and then in RESP3, with `n` keys on
/// different shards.
fn script_both_protocols(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| {
        let keys = Layout::CrossShard.keys(n);
        for (protocol, switch) in [("RESP2", false), ("RESP3", true)] {
            if switch {
                resp3(d);
            }
            let ctx = format!("{ctx}, {protocol}");
            script(d, &keys, &ctx, "FLUSHALL");
            script(d, &keys, &ctx, text);
        }
    });
}

/// The Sicily of the Redis docs, at key K0.
const SICILY: &str = r#"
    GEOADD K0 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania"
    GEOADD K0 13.583333 37.316667 Agrigento
"#;

/// The read commands and their replies: distances in every unit, positions, hashes, the
/// search options and their reply shapes.
#[test]
fn geo_reads_match_redis() {
    let text = format!(
        "{SICILY}{}",
        r#"
        ZRANGE K0 0 -1 WITHSCORES
        OBJECT ENCODING K0
        GEODIST K0 Palermo Catania
        GEODIST K0 Palermo Catania m
        GEODIST K0 Palermo Catania KM
        GEODIST K0 Palermo Catania mi
        GEODIST K0 Palermo Catania ft
        GEODIST K0 Palermo Palermo
        GEODIST K0 Palermo nope
        GEODIST K2 Palermo Catania
        GEOPOS K0 Palermo Catania nope Agrigento
        GEOPOS K2 Palermo nope
        GEOHASH K0 Palermo Catania nope Agrigento
        GEOHASH K2 Palermo
        GEORADIUS K0 15 37 100 km
        GEORADIUS K0 15 37 200 km
        GEORADIUS K0 15 37 200 km ASC
        GEORADIUS K0 15 37 200 km DESC
        GEORADIUS K0 15 37 200 km WITHDIST
        GEORADIUS K0 15 37 200 km WITHCOORD
        GEORADIUS K0 15 37 200 km WITHHASH
        GEORADIUS K0 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC
        GEORADIUS K0 15 37 200 km WITHHASH WITHCOORD WITHDIST DESC COUNT 2
        GEORADIUS K0 15 37 200 km COUNT 1
        GEORADIUS K0 15 37 200 km COUNT 1 DESC
        GEORADIUS K0 15 37 200 km COUNT 2 ANY
        GEORADIUS K0 15 37 200 km COUNT 2 ANY DESC
        GEORADIUS K0 15 37 200 km COUNT 1000000000000
        GEORADIUS K0 15 37 124 mi WITHDIST
        GEORADIUS K0 15 37 656168 ft WITHDIST
        GEORADIUS K0 15 37 200000 M WITHDIST
        GEORADIUS K2 15 37 200 km
        GEORADIUS_RO K0 15 37 200 km WITHDIST ASC
        GEORADIUSBYMEMBER K0 Agrigento 100 km
        GEORADIUSBYMEMBER K0 Agrigento 100 km WITHDIST WITHCOORD
        GEORADIUSBYMEMBER_RO K0 Palermo 200 km DESC WITHHASH
        GEORADIUSBYMEMBER K2 Palermo 200 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km ASC
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km
        GEOSEARCH K0 FROMMEMBER Palermo BYRADIUS 200 km WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 400 400 km DESC COUNT 2 WITHHASH
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 100 400 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 400 100 km
        GEOSEARCH K0 FROMMEMBER Catania BYBOX 1 1 m WITHDIST
        GEOSEARCH K0 FROMMEMBER Catania BYRADIUS 0 m WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY WITHDIST
        GEOSEARCH K0 fromlonlat 15 37 byradius 200 KM count 2 asc withdist
        GEOSEARCH K0 FROMMEMBER Palermo FROMMEMBER Catania BYRADIUS 1 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km BYRADIUS 200 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km ASC DESC
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 COUNT 3
        GEOSEARCH K2 FROMLONLAT 15 37 BYRADIUS 200 km
        GEOSEARCH K2 FROMMEMBER nope BYRADIUS 200 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS inf km WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1e308 mi WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX inf inf km WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 1e308 1e308 mi WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 5e-324 km WITHDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 0x10 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS "1e-3" km
        "#
    );
    script_both_protocols(3, &text);
}

/// Every argument error, in Redis's order of checks, and keys of another type.
#[test]
fn geo_errors_match_redis() {
    let text = format!(
        "{SICILY}{}",
        r#"
        SET K1 v
        GEOADD
        GEOADD K3
        GEOADD K3 1 2
        GEOADD K3 1 2 m 3
        GEOADD K3 nx xx 1 2 m
        GEOADD K3 xx nx 1 2 m
        GEOADD K3 ch ch ch
        GEOADD K3 nx ch 1
        GEOADD K3 gt 1 2 m
        GEOADD K3 incr 1 2 m
        GEOADD K3 1 2 m 200 2 m2
        GEOADD K3 1 2 m x 2 m2
        GEOADD K3 1 2 m 2 x m2
        GEOADD K3 x 200 m
        GEOADD K3 181 0 m
        GEOADD K3 -180.000001 0 m
        GEOADD K3 0 85.05112879 m
        GEOADD K3 0 -85.05112879 m
        GEOADD K3 0 90 m
        GEOADD K3 -0 100 m
        GEOADD K3 1e300 0 m
        GEOADD K3 0.0078125 100 m
        GEOADD K3 inf 0 m
        GEOADD K3 -inf -inf m
        GEOADD K3 1 nan m
        GEOADD K3 " 1" 2 m
        GEOADD K3 "1 " 2 m
        GEOADD K3 "1\x002" 2 m
        GEOADD K3 0x10 2 m
        EXISTS K3
        GEOADD K1 1 2 m
        GEOADD K1 1 200 m
        GEOPOS K1 m
        GEOHASH K1 m
        GEODIST K1 a b
        GEODIST K1 a b x
        GEODIST K1 a b m x
        GEODIST K0 a b yd
        GEODIST K0
        GEOPOS
        GEOHASH
        GEORADIUS K1 0 0 1 m
        GEORADIUS K1 x 0 1 m
        GEORADIUS K0 x 0 1 m
        GEORADIUS K0 0 x 1 m
        GEORADIUS K0 500 0 1 m
        GEORADIUS K0 500 x 1 m
        GEORADIUS K0 0 0 x m
        GEORADIUS K0 0 0 -1 m
        GEORADIUS K0 0 0 -1 mm
        GEORADIUS K0 0 0 1 mm
        GEORADIUS K0 0 0 1 "m\x00x"
        GEORADIUS K0 0 0 nan m
        GEORADIUS K0 15 37
        GEORADIUS K0 15 37 200 km COUNT
        GEORADIUS K0 15 37 200 km COUNT 0
        GEORADIUS K0 15 37 200 km COUNT -1
        GEORADIUS K0 15 37 200 km COUNT x
        GEORADIUS K0 15 37 200 km COUNT 9223372036854775808
        GEORADIUS K0 15 37 200 km COUNT 0 FOO
        GEORADIUS K0 15 37 200 km ANY
        GEORADIUS K0 15 37 200 km ANY WITHDIST FOO
        GEORADIUS K0 15 37 200 km STORE
        GEORADIUS K0 15 37 200 km STOREDIST
        GEORADIUS K0 15 37 200 km STORE K3 WITHDIST
        GEORADIUS K0 15 37 200 km WITHCOORD STOREDIST K3
        GEORADIUS K0 15 37 200 km WITHHASH STORE K3 ANY
        GEORADIUS K0 15 37 200 km STORE K3 ANY
        GEORADIUS K0 15 37 200 km FOO
        GEORADIUS K0 15 37 200 km FROMLONLAT 1 2
        GEORADIUS K0 15 37 200 km BYRADIUS 1 km
        GEORADIUS_RO K0 15 37 200 km STORE K3
        GEORADIUS_RO K0 15 37 200 km STOREDIST K3
        GEORADIUS_RO K1 15 37 200 km STORE K3
        GEORADIUSBYMEMBER K1 nope 200 km
        GEORADIUSBYMEMBER K0 nope 200 km
        GEORADIUSBYMEMBER K0 nope x km
        GEORADIUSBYMEMBER K0 Palermo x km
        GEORADIUSBYMEMBER K0 Palermo -1 km
        GEORADIUSBYMEMBER K0 Palermo 1 kmx
        GEORADIUSBYMEMBER K0 Palermo 1 km COUNT 0
        GEORADIUSBYMEMBER K2 nope x kmx
        GEORADIUSBYMEMBER K2 nope x kmx FOO
        GEORADIUSBYMEMBER K2 nope x kmx COUNT 0
        GEORADIUSBYMEMBER K2 nope x kmx ANY
        GEORADIUSBYMEMBER K2 nope x kmx WITHDIST STORE K3
        GEORADIUSBYMEMBER K2 nope x kmx STORE K3 WITHDIST
        GEORADIUSBYMEMBER_RO K2 nope x kmx STORE K3
        GEORADIUSBYMEMBER_RO K0 Palermo 1 km STORE K3
        GEOSEARCH K0
        GEOSEARCH K0 FROMLONLAT 15 37
        GEOSEARCH K1 FROMLONLAT 15 37 BYRADIUS 1 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km FOO
        GEOSEARCH K0 BYRADIUS 200 km WITHDIST WITHHASH
        GEOSEARCH K0 FROMLONLAT 15 37 WITHDIST WITHHASH
        geoSearch K0 FROMLONLAT 15 37 WITHDIST WITHHASH
        GeoSearch K0 BYBOX 1 1 km ASC ASC
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 200 km BYBOX 1 1 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYBOX 1 1 km BYRADIUS 200 km
        GEOSEARCH K0 FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 200 km
        GEOSEARCH K0 FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 200 km
        GEOSEARCH K0 FROMMEMBER nope BYRADIUS 200 km
        GEOSEARCH K0 FROMMEMBER nope BYRADIUS -1 km FOO
        GEOSEARCH K0 BYRADIUS -1 km FROMMEMBER nope
        GEOSEARCH K0 FOO FROMMEMBER nope BYRADIUS -1 km
        GEOSEARCH K0 FROMMEMBER Palermo BYRADIUS
        GEOSEARCH K0 FROMMEMBER Palermo BYRADIUS 1
        GEOSEARCH K0 FROMMEMBER Palermo BYBOX 1 1
        GEOSEARCH K0 FROMLONLAT 15 BYRADIUS 1 km
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km STORE K3
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST K3
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km ANY
        GEOSEARCH K0 FROMLONLAT 15 37 BYRADIUS 1 km COUNT 0 ANY
        GEOSEARCH K2 FROMMEMBER nope BYRADIUS x km
        GEOSEARCH K2 FROMMEMBER nope BYBOX x 1 km
        GEOSEARCH K2 FROMMEMBER nope BYBOX 1 x km
        GEOSEARCH K2 FROMMEMBER nope BYBOX x y km
        GEOSEARCH K2 FROMMEMBER nope BYBOX -1 1 km
        GEOSEARCH K2 FROMMEMBER nope BYBOX 1 -1 kmm
        GEOSEARCH K2 FROMMEMBER nope BYBOX 1 1 kmm
        GEOSEARCH K2 FROMMEMBER nope BYBOX 1 1 km WITHDIST FOO
        GEOSEARCH K2 FROMMEMBER nope
        GEOSEARCH K2 BYBOX 1 1 km
        GEOSEARCH K2 FROMLONLAT 500 0 BYBOX 1 1 km
        GEOSEARCHSTORE K3 K0 FROMLONLAT 15 37 BYBOX 400 400 km WITHDIST
        GEOSEARCHSTORE K3 K0 FROMLONLAT 15 37 BYBOX 400 400 km STORE K4
        GEOSEARCHSTORE K3 K0 FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST K4
        GEOSEARCHSTORE K3 K0 FROMLONLAT 15 37
        GEOSEARCHSTORE K3 K0 BYRADIUS 1 m
        gEoSeArChStOrE K3 K0 BYRADIUS 1 m
        GEOSEARCHSTORE K3 K1 FROMLONLAT 15 37 BYRADIUS 1 m
        GEOSEARCHSTORE K3 K0 FROMLONLAT 15 37 BYRADIUS 1 m ANY
        GEOSEARCHSTORE K3 K2 FROMMEMBER nope BYRADIUS 1 m WITHHASH
        EXISTS K3
        TYPE K1
        "#
    );
    script_both_protocols(5, &text);
}

/// GEOADD's options (NX, XX, CH, in any order and repeated) as ZADD's, the encodings it
/// makes, and geo sets as sorted sets: their exact scores, and scores GEOADD never makes
/// read back as points.
#[test]
fn geoadd_and_geo_scores_match_redis() {
    let mut many = String::from("GEOADD K1");
    for i in 0..130 {
        many.push_str(&format!(" {}.5 {}.25 p{i}", i - 65, i % 80 - 40));
    }
    let text = format!(
        "{SICILY}{}{many}{}",
        r#"
        GEOADD K0 13.361389 38.115556 Palermo
        GEOADD K0 CH 13.361389 38.115556 Palermo 15 37 Catania
        GEOADD K0 NX CH 1 1 Palermo 2 2 Nowhere
        GEOADD K0 XX CH 3 3 Nowhere 4 4 Elsewhere
        GEOADD K0 XX 5 5 Elsewhere
        GEOADD K0 ch nx ch 6 6 Palermo
        ZRANGE K0 0 -1 WITHSCORES
        ZSCORE K0 Catania
        GEOADD K2 180 85.05112878 ne -180 -85.05112878 sw 0 0 origin 180 -85.05112878 se -180 85.05112878 nw
        GEOADD K2 179.999999 85.051128 a -179.999999 -85.051128 b 0.000001 -0.000001 c
        ZRANGE K2 0 -1 WITHSCORES
        GEOPOS K2 ne sw origin se nw a b c
        GEOHASH K2 ne sw origin se nw a b c
        GEODIST K2 ne sw
        GEODIST K2 ne se km
        GEODIST K2 origin a mi
        GEOSEARCH K2 FROMMEMBER origin BYRADIUS 30000 km WITHDIST WITHCOORD WITHHASH ASC
        GEOSEARCH K2 FROMMEMBER ne BYBOX 40000 40000 km WITHDIST DESC
        GEOSEARCH K2 FROMLONLAT 180 85.05112878 BYRADIUS 1 km WITHDIST
        GEOSEARCH K2 FROMLONLAT -180 -85.05112878 BYRADIUS 100 km WITHDIST
        GEORADIUS K2 0 0 1 m WITHCOORD
        ZADD K3 -5 m1 inf m2 1e300 m3 -1e300 m4 1e19 m5 -inf m6 1.5 m7 9007199254740993 m8 4503599627370496 m9 18014398509481983 m10 0 m11
        GEOPOS K3 m1 m2 m3 m4 m5 m6 m7 m8 m9 m10 m11
        GEOHASH K3 m1 m2 m3 m4 m5 m6 m7 m8 m9 m10 m11
        GEODIST K3 m1 m2
        GEODIST K3 m1 m3 km
        GEODIST K3 m5 m8 mi
        GEOSEARCH K3 FROMLONLAT 0 0 BYRADIUS 50000 km WITHHASH WITHCOORD
        GEOSEARCH K3 FROMMEMBER m1 BYRADIUS 50000 km WITHHASH ASC
        GEOSEARCH K3 FROMMEMBER m7 BYRADIUS 1 km WITHDIST
        ZADD K4 1 a
        GEOADD K4 1 1 b
        OBJECT ENCODING K4
        ZRANGE K4 0 -1 WITHSCORES
        "#,
        r#"
        OBJECT ENCODING K1
        ZRANGE K1 0 -1 WITHSCORES
        GEOPOS K1 p0 p64 p65 p129
        GEOHASH K1 p0 p64 p65 p129
        "#
    );
    script_both_protocols(5, &text);
}

/// The STORE forms with their keys in one slot, on one shard, on different shards: the
/// destination made (scored by geohash or by distance; its encoding by its size),
/// replaced whatever it held, or deleted when nothing matched or the source is missing;
/// errors before anything is written; inside MULTI.
#[test]
fn stores_match_redis() {
    let mut many = String::from("GEOADD K0");
    for i in 0..200 {
        many.push_str(&format!(
            " {:.4} {:.4} p{i}",
            13.0 + i as f64 * 0.01,
            38.0 - i as f64 * 0.005
        ));
    }
    let text = format!(
        "{SICILY}{}{many}{}",
        r#"
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 200 km
        ZRANGE K1 0 -1 WITHSCORES
        OBJECT ENCODING K1
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYBOX 400 400 km ASC COUNT 2 STOREDIST
        ZRANGE K1 0 -1 WITHSCORES
        GEOSEARCHSTORE K1 K0 FROMMEMBER Palermo BYRADIUS 200 km DESC STOREDIST
        ZRANGE K1 0 -1 WITHSCORES
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 1 m
        EXISTS K1
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 1 m
        GEOSEARCHSTORE K1 K2 FROMLONLAT 15 37 BYRADIUS 200 km
        SET K1 v EX 100
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY
        TTL K1
        TYPE K1
        SET K1 v
        GEOSEARCHSTORE K1 K2 FROMLONLAT 15 37 BYRADIUS 200 km
        EXISTS K1
        SET K2 v
        SET K1 v
        GEOSEARCHSTORE K1 K2 FROMLONLAT 15 37 BYRADIUS 200 km
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST
        GET K1
        DEL K2
        GEORADIUS K0 15 37 200 km STORE K1
        ZRANGE K1 0 -1 WITHSCORES
        GEORADIUS K0 15 37 200 km STOREDIST K1 COUNT 2 DESC
        ZRANGE K1 0 -1 WITHSCORES
        GEORADIUS K0 15 37 200 km STORE K1 STOREDIST K2
        ZRANGE K2 0 -1 WITHSCORES
        GEORADIUS K0 15 37 200 mi STOREDIST K2 STORE K1
        ZRANGE K1 0 -1 WITHSCORES
        GEORADIUS K0 15 37 1 m STORE K1
        EXISTS K1
        GEORADIUSBYMEMBER K0 Palermo 100 km STOREDIST K2
        ZRANGE K2 0 -1 WITHSCORES
        GEORADIUSBYMEMBER K0 Palermo 100 km STORE K2 COUNT 1
        ZRANGE K2 0 -1 WITHSCORES
        GEORADIUSBYMEMBER K3 Palermo x km STORE K2
        EXISTS K2
        GEORADIUS K3 15 37 200 km STORE K1
        GEORADIUS K0 15 37 200 km STORE K0
        ZRANGE K0 0 -1 WITHSCORES
        MULTI
        GEOSEARCHSTORE K1 K0 FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST
        GEORADIUS K0 15 37 200 km STORE K2
        ZRANGE K1 0 -1 WITHSCORES
        EXEC
        "#,
        r#"
        GEOSEARCHSTORE K1 K0 FROMLONLAT 14 37.5 BYRADIUS 500 km
        OBJECT ENCODING K1
        ZCARD K1
        GEOSEARCHSTORE K1 K0 FROMLONLAT 14 37.5 BYRADIUS 500 km COUNT 128
        OBJECT ENCODING K1
        GEOSEARCHSTORE K1 K0 FROMLONLAT 14 37.5 BYRADIUS 500 km COUNT 129
        OBJECT ENCODING K1
        GEORADIUS K0 14 37.5 500 km STOREDIST K2 DESC
        OBJECT ENCODING K2
        ZRANGE K2 0 9 WITHSCORES
        GEOSEARCH K0 FROMLONLAT 14 37.5 BYRADIUS 500 km COUNT 5
        "#
    );
    script_everywhere(4, &text);
}

/// `GEOADD key` with a grid of `n` points around (`lon`, `lat`), `step` degrees apart,
/// every third point doubled by a member at the same place (ties in distance).
fn grid(key: &str, n: usize, lon: f64, lat: f64, step: f64) -> String {
    let side = (n as f64).sqrt().ceil() as usize;
    let mut line = format!("GEOADD {key}");
    for i in 0..n {
        let (x, y) = ((i % side) as f64, (i / side) as f64);
        let (px, py) = (lon + x * step, lat + y * step);
        line.push_str(&format!(" {px:.6} {py:.6} g{i:03}"));
        if i % 3 == 0 {
            line.push_str(&format!(" {px:.6} {py:.6} t{i:03}"));
        }
    }
    line
}

/// Results in Redis's order where the command does not sort (the cells' order, each
/// cell's in set order), ties in distance in the order its sorts leave them (a full sort,
/// and the partial sort of COUNT), ANY stopping where Redis stops; on both encodings,
/// across the antimeridian and near the poles.
#[test]
fn orders_ties_and_any_match_redis() {
    let mut text = String::new();
    for (key, n, lon, lat, step) in [
        ("K0", 40, 13.0, 38.0, 0.05),
        ("K1", 300, 13.0, 38.0, 0.02),
        ("K2", 100, 179.6, -10.0, 0.1),
        ("K3", 100, -20.0, 83.0, 0.4),
    ] {
        text.push_str(&grid(key, n, lon, lat, step));
        text.push('\n');
        let (clon, clat) = (lon + step * 4.0, lat + step * 4.0);
        for shape in [
            "BYRADIUS 10 km",
            "BYRADIUS 40 km",
            "BYRADIUS 300 km",
            "BYRADIUS 5000 km",
            "BYRADIUS 20000 km",
            "BYBOX 30 30 km",
            "BYBOX 100 20 km",
            "BYBOX 1000 1000 km",
        ] {
            for opts in [
                "",
                "ASC",
                "DESC",
                "COUNT 1",
                "COUNT 7",
                "COUNT 7 DESC",
                "COUNT 60",
                "COUNT 5 ANY",
                "COUNT 5 ANY ASC",
                "COUNT 40 ANY DESC",
                "WITHDIST COUNT 10",
            ] {
                text.push_str(&format!(
                    "GEOSEARCH {key} FROMLONLAT {clon} {clat} {shape} {opts}\n"
                ));
            }
            text.push_str(&format!(
                "GEOSEARCH {key} FROMMEMBER g000 {shape} WITHDIST\n"
            ));
        }
        text.push_str(&format!("GEORADIUS {key} {lon} {lat} 50 km\n"));
        text.push_str(&format!("GEORADIUSBYMEMBER_RO {key} t003 100 km COUNT 4\n"));
    }
    for_each_thread_count(|d, ctx| {
        script(d, &[], ctx, "FLUSHALL");
        script(d, &Layout::CrossShard.keys(4), ctx, &text);
    });
}

/// Large groups of members at equal distances (150 members on 15 places): where ASC,
/// DESC and COUNT leave ties is where Redis's sorts leave them — glibc's merge sort, and
/// the partial quicksort's pivots (median of three, and of nine past 40 elements) — in
/// replies and in STORE destinations.
#[test]
fn ties_in_distance_match_redis() {
    let mut rng = Rng::new(5);
    let mut text = String::from("GEOADD K0");
    for i in 0..150 {
        let x = *rng.pick(&["0", "0.001", "-0.001", "0.002", "0.0005"]);
        let y = *rng.pick(&["0", "0.001", "-0.002"]);
        text.push_str(&format!(" {x} {y} m{:05}", rng.below(100_000) * 1000 + i));
    }
    text.push('\n');
    for count in [1, 2, 7, 30, 41, 70, 120, 149, 150, 200] {
        for order in ["ASC", "DESC", ""] {
            text.push_str(&format!(
                "GEOSEARCH K0 FROMLONLAT 0 0 BYRADIUS 10 km COUNT {count} {order} WITHDIST\n\
                 GEOSEARCHSTORE K1 K0 FROMLONLAT 0 0 BYRADIUS 10 km COUNT {count} {order} STOREDIST\n\
                 ZRANGE K1 0 -1 WITHSCORES\n"
            ));
        }
    }
    text.push_str("GEOSEARCH K0 FROMLONLAT 0 0 BYRADIUS 10 km ASC\n");
    text.push_str("GEOSEARCH K0 FROMLONLAT 0 0 BYRADIUS 10 km DESC\n");
    for_each_thread_count(|d, ctx| {
        script(d, &[], ctx, "FLUSHALL");
        script(d, &Layout::CrossShard.keys(2), ctx, &text);
    });
}

/// A random coordinate: anywhere, in a small cluster (many matches, close ties), or on
/// the limits.
fn coordinate(rng: &mut Rng) -> (String, String) {
    match rng.below(10) {
        0..=3 => (
            format!("{:.6}", rng.range(-180_000_000, 180_000_000) as f64 / 1e6),
            format!("{:.6}", rng.range(-85_051_128, 85_051_128) as f64 / 1e6),
        ),
        4..=8 => (
            format!("{:.5}", 13.0 + rng.range(-100_000, 100_000) as f64 / 1e5),
            format!("{:.5}", 38.0 + rng.range(-100_000, 100_000) as f64 / 1e5),
        ),
        _ => (
            (*rng.pick(&["180", "-180", "0", "179.99999", "-179.99999"])).to_string(),
            (*rng.pick(&["85.05112878", "-85.05112878", "0", "84.9", "-84.9"])).to_string(),
        ),
    }
}

/// Random options for a search: WITH…s (unless it stores), ASC or DESC, COUNT with or
/// without ANY, in a random order.
fn options(rng: &mut Rng, stores: bool) -> String {
    let mut opts: Vec<String> = Vec::new();
    if !stores {
        for with in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
            if rng.percent(25) {
                opts.push(with.to_string());
            }
        }
    }
    match rng.below(5) {
        0 => opts.push("ASC".into()),
        1 => opts.push("DESC".into()),
        _ => {}
    }
    if rng.percent(40) {
        let n = *rng.pick(&[1, 2, 3, 5, 10, 50]);
        opts.push(format!("COUNT {n}"));
        if rng.percent(30) {
            opts.push("ANY".into());
        }
    }
    for i in (1..opts.len()).rev() {
        opts.swap(i, rng.below(i + 1));
    }
    opts.join(" ")
}

/// Random points (some at the same place under two names) and random searches of every
/// kind, their STORE forms to a key on another shard; replies compared one by one.
#[test]
fn random_points_and_searches_match_redis() {
    for_each_thread_count(|d, ctx| {
        for seed in seeds("geo random searches", 2) {
            let mut rng = Rng::new(seed);
            let keys = Layout::CrossShard.keys(3);
            let (src, dst) = (&keys[0], &keys[1]);
            let points = *rng.pick(&[5, 60, 250]);
            let mut lines = Vec::new();
            for i in 0..points {
                let (x, y) = coordinate(&mut rng);
                lines.push(format!("GEOADD {src} {x} {y} m{i}"));
                if rng.percent(20) {
                    lines.push(format!("GEOADD {src} {x} {y} d{i}"));
                }
            }
            lines.push(format!("ZRANGE {src} 0 -1 WITHSCORES"));
            let units = ["m", "km", "mi", "ft", "KM"];
            for _ in 0..250 {
                let (x, y) = coordinate(&mut rng);
                let radius =
                    *rng.pick(&["0", "0.5", "1", "10", "100", "500", "1000", "5000", "20000"]);
                let side = *rng.pick(&["1", "100", "3000", "40000"]);
                let unit = *rng.pick(&units);
                let member = format!("m{}", rng.below(points));
                let line = match rng.below(8) {
                    0 | 1 => format!(
                        "GEOSEARCH {src} FROMLONLAT {x} {y} BYRADIUS {radius} {unit} {}",
                        options(&mut rng, false)
                    ),
                    2 => format!(
                        "GEOSEARCH {src} FROMMEMBER {member} BYBOX {radius} {side} {unit} {}",
                        options(&mut rng, false)
                    ),
                    3 => format!(
                        "GEORADIUS {src} {x} {y} {radius} {unit} {}",
                        options(&mut rng, false)
                    ),
                    4 => format!(
                        "GEORADIUSBYMEMBER_RO {src} {member} {radius} {unit} {}",
                        options(&mut rng, false)
                    ),
                    5 => format!(
                        "GEOSEARCHSTORE {dst} {src} FROMLONLAT {x} {y} BYBOX {side} {radius} {unit} {} {}",
                        options(&mut rng, true),
                        *rng.pick(&["", "STOREDIST"])
                    ),
                    6 => format!(
                        "GEORADIUSBYMEMBER {src} {member} {radius} {unit} {} {} {dst}",
                        options(&mut rng, true),
                        *rng.pick(&["STORE", "STOREDIST"])
                    ),
                    _ => format!("GEODIST {src} {member} m{} {unit}", rng.below(points)),
                };
                let stores = line.contains(dst.as_str());
                lines.push(line);
                if stores {
                    lines.push(format!("ZRANGE {dst} 0 -1 WITHSCORES"));
                }
            }
            let ctx = format!("{ctx}, seed {seed}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &[], &ctx, &lines.join("\n"));
        }
    });
}

/// Goblin's one deliberate difference: a GEORADIUS whose destination (its last STORE or
/// STOREDIST) is not a destination its key specs name (the first of each) — even its
/// source, which they name for reading — is refused, with nothing written; a destination
/// named twice alike is no such case.
#[test]
fn a_destination_the_specs_do_not_name_is_refused() {
    let server = Server::goblin_threads(4);
    let mut raw = server.raw();
    let add = raw.cmd(&[b"GEOADD", b"src", b"13.361389", b"38.115556", b"Palermo"]);
    assert_eq!(add, b":1\r\n");
    let refused = b"-ERR the destination must be named by the first STORE or STOREDIST option: give one destination\r\n";
    for line in [
        "GEORADIUS src 15 37 200 km STORE a STORE b",
        "GEORADIUS src 15 37 200 km STOREDIST a STOREDIST b",
        "GEORADIUSBYMEMBER src Palermo 200 km STORE a COUNT 1 STORE b",
        "GEORADIUS src 15 37 200 km STORE a STORE src",
    ] {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let reply = raw.cmd(&args);
        assert_eq!(reply, refused, "{line}: {}", show(&reply));
    }
    for key in [&b"a"[..], b"b"] {
        assert_eq!(raw.cmd(&[b"EXISTS", key]), b":0\r\n");
    }
    for (line, key) in [
        ("GEORADIUS src 15 37 200 km STORE a STORE a", &b"a"[..]),
        ("GEORADIUS src 15 37 200 km STORE a STOREDIST b", b"b"),
        ("GEORADIUS src 15 37 200 km STOREDIST c STORE src", b"src"),
    ] {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let reply = raw.cmd(&args);
        assert_eq!(reply, b":1\r\n", "{line}: {}", show(&reply));
        assert_eq!(raw.cmd(&[b"EXISTS", key]), b":1\r\n", "{line}");
    }
}
