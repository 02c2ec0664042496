//! The geohash arithmetic of redis-server 7.0 (`geohash.c`, `geohash_helper.c`): points
//! interleaved into 52-bit sorted-set scores, cells decoded back to their centres, the
//! nine cells a search scans, and the haversine distance.
//!
//! Every step is the C code's own, operation for operation in `f64` (SSE2 doubles, no
//! fused multiply-add), with the same libm calls (`sin`, `cos`, `asin`, `sqrt`): scores,
//! coordinates and distances come out bit for bit as redis-server's, which is what makes
//! its replies — and which members fall inside a search — the same. Where C converts a
//! double to an integer with a result the standard leaves undefined (a score that is no
//! geohash), the conversion is x86-64's, as gcc compiles it.

use std::cmp::Ordering;
use std::f64::consts::PI;

/// Bits per coordinate of a stored point: 26 + 26 = the 52 bits of a score.
pub const STEP_MAX: u8 = 26;
/// The latitude limits (EPSG:900913): points nearer the poles cannot be indexed.
pub const LAT_MIN: f64 = -85.05112878;
/// See [`LAT_MIN`].
pub const LAT_MAX: f64 = 85.05112878;
/// The longitude limits.
pub const LONG_MIN: f64 = -180.0;
/// See [`LONG_MIN`].
pub const LONG_MAX: f64 = 180.0;
/// Earth's quadratic mean radius for WGS-84, in meters (Redis's `EARTH_RADIUS_IN_METERS`).
const EARTH_RADIUS: f64 = 6372797.560856;
/// Half the Mercator projection's width, in meters: the radius at which one step of
/// precision is lost (`MERCATOR_MAX`).
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians (`D_R`, folded by the C compiler into one constant, as here).
const D_R: f64 = PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash: `step` bits of each coordinate, interleaved (latitude in the even bits,
/// longitude in the odd ones). `bits == 0 && step == 0` is "no cell" (`HASHISZERO`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashBits {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate, 1 to 26 (0 for no cell).
    pub step: u8,
}

impl HashBits {
    /// No cell (`GZERO`).
    const ZERO: HashBits = HashBits { bits: 0, step: 0 };

    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score of the cell's first point: its bits aligned to 52 (`geohashAlign52Bits`).
    pub fn align52(self) -> u64 {
        self.bits << 52u32.saturating_sub(2 * u32::from(self.step))
    }

    /// The scores of the cell's points: `min..max` (`scoresOfGeoHashBox`).
    pub fn score_range(self) -> (u64, u64) {
        let next = HashBits {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

/// A coordinate's extent.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Range {
    min: f64,
    max: f64,
}

/// What Redis indexes: longitudes and latitudes within its limits.
const WGS84: (Range, Range) = (
    Range {
        min: LONG_MIN,
        max: LONG_MAX,
    },
    Range {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// The standard geohash's extent (GEOHASH's strings).
const STANDARD: (Range, Range) = (
    Range {
        min: -180.0,
        max: 180.0,
    },
    Range {
        min: -90.0,
        max: 90.0,
    },
);

/// A decoded cell.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Area {
    longitude: Range,
    latitude: Range,
}

/// Spreads the bits of `x` into the even bits and those of `y` into the odd bits
/// (`interleave64`).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave64`]: the even bits in the low half, the odd bits in the
/// high half (`deinterleave64`).
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
        0x0000_0000_FFFF_FFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// The cell of `step` bits holding a point (`geohashEncode`); `None` outside Redis's
/// limits or the ranges.
fn encode(ranges: (Range, Range), longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    let (long_range, lat_range) = ranges;
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    lat_offset *= scale;
    long_offset *= scale;
    // Within 0..=2^step: C's conversion to uint32_t truncates, as `as` does.
    Some(HashBits {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The cell of `step` bits holding a point within Redis's limits (`geohashEncodeWGS84`).
pub fn encode_wgs84(longitude: f64, latitude: f64, step: u8) -> Option<HashBits> {
    encode(WGS84, longitude, latitude, step)
}

/// The extent of a cell (`geohashDecode`); `None` for no cell.
fn decode(ranges: (Range, Range), hash: HashBits) -> Option<Area> {
    let (long_range, lat_range) = ranges;
    if hash.is_zero() {
        return None;
    }
    let step = u32::from(hash.step);
    let hash_sep = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = hash_sep as u32;
    let ilono = (hash_sep >> 32) as u32;
    let cells = (1u64 << step) as f64;
    // `ilato + 1` is C's unsigned int arithmetic: it wraps.
    let at = |i: u32, range: Range, scale: f64| range.min + (f64::from(i) * 1.0 / cells) * scale;
    Some(Area {
        latitude: Range {
            min: at(ilato, lat_range, lat_scale),
            max: at(ilato.wrapping_add(1), lat_range, lat_scale),
        },
        longitude: Range {
            min: at(ilono, long_range, long_scale),
            max: at(ilono.wrapping_add(1), long_range, long_scale),
        },
    })
}

/// A cell's centre, clamped to Redis's limits (`geohashDecodeAreaToLongLat`).
fn centre(area: &Area) -> [f64; 2] {
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// What `(uint64_t)d` gives on x86-64 as gcc compiles it: the truncated value within
/// `0..2^64`; below 2^63 the signed conversion (`cvttsd2si`), whose out-of-range and NaN
/// result is 2^63 (a negative value wraps, as a signed result reinterpreted); from 2^63
/// on, `d - 2^63` converted the same way with the top bit flipped (0 from 2^64 and for
/// +∞).
pub fn c_double_to_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO_63 {
        c_double_to_i64(d - TWO_63) as u64 ^ (1 << 63)
    } else {
        c_double_to_i64(d) as u64
    }
}

/// What `(long long)d` gives on x86-64 (`cvttsd2si`): the truncated value, or
/// `i64::MIN` for NaN and anything outside the range.
pub fn c_double_to_i64(d: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    // NaN is in no range.
    if !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// The point a score stands for: the centre of its 52-bit cell (`decodeGeohash`). Any
/// score decodes (one that is no geohash lands somewhere within the limits).
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    decode(WGS84, hash).map_or([0.0, 0.0], |area| centre(&area))
}

/// The score of a point within Redis's limits: its 52-bit geohash (GEOADD).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode_wgs84(longitude, latitude, STEP_MAX).map(HashBits::align52)
}

/// The 11-character standard geohash of a point within the limits (GEOHASH): re-encoded
/// over the standard latitudes ±90; the eleventh character, for which 52 bits have no
/// room, is `0`.
pub fn standard_geohash(longitude: f64, latitude: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let bits = encode(STANDARD, longitude, latitude, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [ALPHABET[0]; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

/// Moves a cell one column east (`d > 0`) or west (`geohash_move_x`), wrapping around.
fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - 2 * u32::from(hash.step);
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz.wrapping_add(1));
    } else {
        x |= zz;
        x = x.wrapping_sub(zz.wrapping_add(1));
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

/// Moves a cell one row north (`d > 0`) or south (`geohash_move_y`), wrapping around.
fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - 2 * u32::from(hash.step);
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz.wrapping_add(1));
    } else {
        y |= zz;
        y = y.wrapping_sub(zz.wrapping_add(1));
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

/// A cell's eight neighbours.
#[derive(Clone, Copy, Debug, Default)]
struct Neighbors {
    north: HashBits,
    east: HashBits,
    west: HashBits,
    south: HashBits,
    north_east: HashBits,
    south_east: HashBits,
    north_west: HashBits,
    south_west: HashBits,
}

/// The eight cells around `hash` (`geohashNeighbors`).
fn neighbors(hash: HashBits) -> Neighbors {
    if hash.step == 0 || hash.step > 32 {
        return Neighbors::default();
    }
    let moved = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: moved(1, 0),
        west: moved(-1, 0),
        south: moved(0, -1),
        north: moved(0, 1),
        north_west: moved(-1, 1),
        north_east: moved(1, 1),
        south_east: moved(1, -1),
        south_west: moved(-1, -1),
    }
}

/// The distance between two latitudes on one meridian (`geohashGetLatDistance`).
fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// The haversine great-circle distance in meters (`geohashGetDistance`). Antipodes may
/// give NaN, as in Redis.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// The step whose cells are about the size of `range_meters` at latitude `lat`
/// (`geohashEstimateStepsByRadius`).
fn estimate_steps(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers around its centre.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    /// A circle (BYRADIUS, GEORADIUS), of this radius in the unit.
    Radius(f64),
    /// An axis-aligned box (BYBOX), this wide and high in the unit.
    Box {
        /// Its width.
        width: f64,
        /// Its height.
        height: f64,
    },
}

/// A search's shape (`GeoShape`): its centre, its extent in a unit, and the unit's
/// meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Longitude and latitude of the centre.
    pub xy: [f64; 2],
    /// Meters per unit.
    pub conversion: f64,
    /// The extent, in the unit.
    pub extent: Extent,
}

impl Shape {
    /// The shape's bounding box: min and max longitude, min and max latitude
    /// (`geohashBoundingBox`).
    fn bounds(&self) -> [f64; 4] {
        let [longitude, latitude] = self.xy;
        let (height, width) = match self.extent {
            Extent::Radius(r) => (self.conversion * r, self.conversion * r),
            Extent::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS);
        let long_delta_top = rad_deg(width / EARTH_RADIUS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom = rad_deg(width / EARTH_RADIUS / deg_rad(latitude - lat_delta).cos());
        let long_delta = if latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - long_delta,
            latitude - lat_delta,
            longitude + long_delta,
            latitude + lat_delta,
        ]
    }

    /// The cells a search scans, in Redis's order: the centre's cell, then north, south,
    /// east, west, north-east, north-west, south-east, south-west; cells that cannot hold
    /// a match are left out, and a cell equal to the one scanned just before it is
    /// skipped (`geohashCalculateAreasByShapeWGS84`, `membersOfAllNeighbors`).
    pub fn cells(&self) -> Vec<HashBits> {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let [longitude, latitude] = self.xy;
        let radius_meters = match self.extent {
            Extent::Radius(r) => r,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps(radius_meters, latitude);
        let at = |steps: u8| {
            let hash = encode(WGS84, longitude, latitude, steps).unwrap_or_default();
            let area = decode(WGS84, hash);
            (hash, neighbors(hash), area)
        };
        let (mut hash, mut around, mut area) = at(steps);
        let edge = |h: HashBits| decode(WGS84, h);
        let decrease = edge(around.north).is_some_and(|a| a.latitude.max < max_lat)
            || edge(around.south).is_some_and(|a| a.latitude.min > min_lat)
            || edge(around.east).is_some_and(|a| a.longitude.max < max_lon)
            || edge(around.west).is_some_and(|a| a.longitude.min > min_lon);
        if steps > 1 && decrease {
            steps -= 1;
            (hash, around, area) = at(steps);
        }
        if steps >= 2
            && let Some(area) = area
        {
            if area.latitude.min < min_lat {
                around.south = HashBits::ZERO;
                around.south_west = HashBits::ZERO;
                around.south_east = HashBits::ZERO;
            }
            if area.latitude.max > max_lat {
                around.north = HashBits::ZERO;
                around.north_east = HashBits::ZERO;
                around.north_west = HashBits::ZERO;
            }
            if area.longitude.min < min_lon {
                around.west = HashBits::ZERO;
                around.south_west = HashBits::ZERO;
                around.north_west = HashBits::ZERO;
            }
            if area.longitude.max > max_lon {
                around.east = HashBits::ZERO;
                around.south_east = HashBits::ZERO;
                around.north_east = HashBits::ZERO;
            }
        }
        let all = [
            hash,
            around.north,
            around.south,
            around.east,
            around.west,
            around.north_east,
            around.north_west,
            around.south_east,
            around.south_west,
        ];
        let mut cells: Vec<HashBits> = Vec::with_capacity(all.len());
        // Redis compares a cell with the last one it scanned, but only once that is a
        // neighbour (`last_processed` starts at 0, the centre's cell, and 0 means none).
        let mut last_processed = 0;
        for (i, &cell) in all.iter().enumerate() {
            if cell.is_zero() || (last_processed != 0 && cell == all[last_processed]) {
                continue;
            }
            cells.push(cell);
            last_processed = i;
        }
        cells
    }

    /// Whether the point `xy` lies within the shape, and its distance from the centre in
    /// meters (`geoWithinShape`).
    pub fn distance_within(&self, xy: [f64; 2]) -> Option<f64> {
        let [x1, y1] = self.xy;
        let [x2, y2] = xy;
        match self.extent {
            Extent::Radius(r) => {
                let d = distance(x1, y1, x2, y2);
                // Compared as C does: a NaN distance (antipodes) is within.
                (d.partial_cmp(&(r * self.conversion)) != Some(Ordering::Greater)).then_some(d)
            }
            Extent::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(y2, y1) > height_m / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width_m / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::longdouble::LongDouble;

    fn human(v: f64) -> String {
        LongDouble::from_f64(v).to_human()
    }

    /// Scores, positions and hashes redis-server 7.0.15 gives (the Redis docs' Sicily,
    /// and the corners of the map).
    #[test]
    fn points_encode_and_decode_as_redis_does() {
        let palermo = score_of(13.361389, 38.115556);
        assert_eq!(palermo, Some(3_479_099_956_230_698));
        assert_eq!(score_of(15.087269, 37.502669), Some(3_479_447_370_796_909));
        assert_eq!(score_of(180.0, LAT_MAX), Some(13_510_798_882_111_488));
        assert_eq!(score_of(-180.0, LAT_MIN), Some(0));
        assert_eq!(score_of(0.0, 0.0), Some(3_377_699_720_527_872));
        assert_eq!(score_of(180.1, 0.0), None);
        let [lon, lat] = decode_score(3_479_099_956_230_698.0);
        assert_eq!(human(lon), "13.36138933897018433");
        assert_eq!(human(lat), "38.11555639549629859");
        assert_eq!(&standard_geohash(lon, lat), b"sqc8b49rny0");
        let [lon, lat] = decode_score(0.0);
        assert_eq!(human(lon), "-179.99999731779098511");
        assert_eq!(human(lat), "-85.05112751263942528");
        assert_eq!(&standard_geohash(lon, lat), b"00bh0hbj200");
    }

    /// Scores that are no geohash decode as x86-64 converts them (checked against
    /// redis-server with ZADD then GEOPOS).
    #[test]
    fn any_score_decodes() {
        assert_eq!(c_double_to_u64(-5.0), (-5i64) as u64);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(1e300), 0);
        assert_eq!(c_double_to_u64(-1e300), 1 << 63);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(c_double_to_u64(1.5), 1);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
        let [lon, lat] = decode_score(-5.0);
        assert_eq!(
            (human(lon).as_str(), human(lat).as_str()),
            ("180", "85.0511287799999991")
        );
        let [lon, lat] = decode_score(-1e300);
        assert_eq!(
            (human(lon).as_str(), human(lat).as_str()),
            ("180", "-85.05112751263942528")
        );
    }

    #[test]
    fn distances_are_haversine_on_redis_radius() {
        let [x1, y1] = decode_score(3_479_099_956_230_698.0);
        let [x2, y2] = decode_score(3_479_447_370_796_909.0);
        let d = distance(x1, y1, x2, y2);
        assert!((d - 166_274.151_6).abs() < 1e-4, "{d}");
        assert_eq!(distance(x1, y1, x1, y1), 0.0);
        // Along a meridian: the latitudes' difference alone.
        assert_eq!(distance(10.0, 0.0, 10.0, 1.0), EARTH_RADIUS * D_R);
    }

    #[test]
    fn neighbours_wrap_around() {
        let h = encode_wgs84(-179.9, 0.0, 2).unwrap_or_default();
        let n = neighbors(h);
        let west = decode(WGS84, n.west).map(|a| a.longitude.max);
        assert_eq!(west, Some(180.0));
        assert_eq!(neighbors(HashBits::ZERO).north, HashBits::ZERO);
    }

    /// The cells scanned never repeat the one scanned just before, and huge or tiny
    /// shapes neither panic nor loop.
    #[test]
    fn cells_of_extreme_shapes() {
        for extent in [
            Extent::Radius(0.0),
            Extent::Radius(f64::MIN_POSITIVE / 4.0),
            Extent::Radius(1e308),
            Extent::Radius(f64::INFINITY),
            Extent::Box {
                width: f64::MAX,
                height: f64::MAX,
            },
            Extent::Box {
                width: 0.0,
                height: 1.0,
            },
        ] {
            for xy in [
                [0.0, 0.0],
                [180.0, LAT_MAX],
                [-180.0, LAT_MIN],
                [10.0, 81.0],
            ] {
                let shape = Shape {
                    xy,
                    conversion: 1609.34,
                    extent,
                };
                let cells = shape.cells();
                assert!(!cells.is_empty() && cells.len() <= 9, "{shape:?}");
                assert!(cells.windows(2).skip(1).all(|w| w[0] != w[1]), "{shape:?}");
            }
        }
    }
}
