//! Geo: GEOADD, GEODIST, GEOHASH, GEOPOS, GEORADIUS, GEORADIUSBYMEMBER
//! (and their `_RO` forms), GEOSEARCH and GEOSEARCHSTORE, over sorted sets
//! whose scores are 52-bit interleaved geohashes, as Redis 7.0's `geo.c`
//! and `geohash*.c` compute them: the same scores, the same search boxes
//! (a centre box and its eight neighbours, visited in Redis's order, so
//! unsorted replies come out in Redis's order), the same haversine
//! distances, and coordinates printed as Redis prints them.

use resp::ReplyBuf;
use store::types::ZSet;
use store::Value;

use super::zset::{as_zset, limits, string2d};
use crate::core::ctx::{eq_ic, parse_i64, Args, Ctx};
use crate::core::effects::Class;
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::{Command, KeyList, Lock};
use crate::subsystems::ldouble::{self, LD_BUF};

const STORING: Lock = Lock::Custom { find: georadius_keys };

pub const COMMANDS: &[Command] = &[
    Command::redis("GEOADD", geoadd),
    Command::redis("GEODIST", geodist),
    Command::redis("GEOHASH", geohash),
    Command::redis("GEOPOS", geopos),
    Command::redis("GEORADIUS", georadius).lock(STORING),
    Command::redis("GEORADIUSBYMEMBER", georadiusbymember).lock(STORING),
    Command::redis("GEORADIUS_RO", georadius_ro),
    Command::redis("GEORADIUSBYMEMBER_RO", georadiusbymember_ro),
    Command::redis("GEOSEARCH", geosearch),
    Command::redis("GEOSEARCHSTORE", geosearchstore),
];

/// GEORADIUS's keys as Redis's key specs find them (the source, the key
/// after the first STORE and after the first STOREDIST), plus the
/// destination actually written (the last of them) when it differs.
fn georadius_keys<'a>(argv: &[&'a [u8]], db: usize, keys: &mut KeyList<'a>) {
    if argv.len() < 2 {
        return;
    }
    keys.push((db, argv[1]));
    let from = if eq_ic(argv[0], "GEORADIUS") { 6 } else { 5 };
    let after = |word: &str| (from..argv.len().saturating_sub(1)).find(|&i| eq_ic(argv[i], word));
    let (store, storedist) = (after("STORE"), after("STOREDIST"));
    let mut last = None;
    let mut i = from;
    while i + 1 < argv.len() {
        if eq_ic(argv[i], "STORE") || eq_ic(argv[i], "STOREDIST") {
            last = Some(i);
            i += 1;
        }
        i += 1;
    }
    for i in [store, storedist].into_iter().flatten() {
        keys.push((db, argv[i + 1]));
    }
    if let Some(i) = last.filter(|l| Some(*l) != store && Some(*l) != storedist) {
        keys.push((db, argv[i + 1]));
    }
}

// ---- geohash -----------------------------------------------------------

const LONG_MIN: f64 = -180.0;
const LONG_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const STEP_MAX: u32 = 26;
const D_R: f64 = std::f64::consts::PI / 180.0;
const EARTH_RADIUS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

#[derive(Clone, Copy, PartialEq)]
struct Hash {
    bits: u64,
    step: u32,
}

const ZERO: Hash = Hash { bits: 0, step: 0 };

#[derive(Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const WGS_LONG: Range = Range { min: LONG_MIN, max: LONG_MAX };
const WGS_LAT: Range = Range { min: LAT_MIN, max: LAT_MAX };

#[derive(Clone, Copy)]
struct Area {
    lon: Range,
    lat: Range,
}

fn interleave(x: u32, y: u32) -> u64 {
    fn spread(v: u32) -> u64 {
        let mut v = u64::from(v);
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    }
    spread(x) | (spread(y) << 1)
}

fn squash(v: u64) -> u32 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((v | (v >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// Redis's `geohashEncode`: `None` outside the ranges or the WGS84 limits.
fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u32) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * (1u64 << step) as f64;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * (1u64 << step) as f64;
    // C converts the offsets to uint32_t (truncation).
    Some(Hash { bits: interleave(lat_off as u32, lon_off as u32), step })
}

fn decode(h: Hash, lon_r: Range, lat_r: Range) -> Area {
    let ilat = f64::from(squash(h.bits));
    let ilon = f64::from(squash(h.bits >> 1));
    let div = (1u64 << h.step) as f64;
    let (lat_s, lon_s) = (lat_r.max - lat_r.min, lon_r.max - lon_r.min);
    Area {
        lat: Range {
            min: lat_r.min + (ilat * 1.0 / div) * lat_s,
            max: lat_r.min + ((ilat + 1.0) * 1.0 / div) * lat_s,
        },
        lon: Range {
            min: lon_r.min + (ilon * 1.0 / div) * lon_s,
            max: lon_r.min + ((ilon + 1.0) * 1.0 / div) * lon_s,
        },
    }
}

/// C's `(uint64_t)score` as Redis's x86-64 build computes it (Rust's
/// cast saturates instead). Below 2^63, and for NaN, `cvttsd2si`, which
/// answers 2^63 for what no `int64_t` holds (negative values wrap as
/// two's complement); from 2^63 up, `cvttsd2si` of the score less 2^63
/// with the top bit flipped, so 2^64 and beyond (infinity too) give 0.
/// A sorted set's score that no GEOADD wrote decodes to where Redis's
/// GEOPOS, GEOHASH and GEODIST put it.
fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    fn cvttsd2si(x: f64) -> u64 {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            1 << 63
        } else {
            x as i64 as u64
        }
    }
    if score >= TWO_63 {
        cvttsd2si(score - TWO_63) ^ (1 << 63)
    } else {
        cvttsd2si(score)
    }
}

/// A score's position (Redis's `decodeGeohash`), clamped to the limits.
fn decode_score(score: f64) -> [f64; 2] {
    let a = decode(Hash { bits: score_bits(score), step: STEP_MAX }, WGS_LONG, WGS_LAT);
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

fn align52(h: Hash) -> u64 {
    h.bits << (52 - h.step * 2)
}

const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const EVEN: u64 = 0x5555_5555_5555_5555;

/// Redis's `geohash_move_x` (`moving` = the odd, longitude bits) and
/// `geohash_move_y` (the even, latitude bits): one box east/west or
/// north/south, wrapping around.
fn step_bits(h: &mut Hash, d: i8, moving: u64) {
    let other = !moving;
    let mut v = h.bits & moving;
    let keep = h.bits & other;
    let zz = other >> (64 - h.step * 2);
    if d > 0 {
        v = v.wrapping_add(zz + 1);
    } else {
        v |= zz;
        v = v.wrapping_sub(zz + 1);
    }
    v &= moving >> (64 - h.step * 2);
    h.bits = v | keep;
}

fn move_x(h: &mut Hash, d: i8) {
    step_bits(h, d, ODD);
}

fn move_y(h: &mut Hash, d: i8) {
    step_bits(h, d, EVEN);
}

/// The centre box and its neighbours in Redis's search order: centre,
/// north, south, east, west, north-east, north-west, south-east,
/// south-west.
fn neighbours(h: Hash) -> [Hash; 9] {
    let at = |dx: i8, dy: i8| {
        let mut n = h;
        if dx != 0 {
            move_x(&mut n, dx);
        }
        if dy != 0 {
            move_y(&mut n, dy);
        }
        n
    };
    [h, at(0, 1), at(0, -1), at(1, 0), at(-1, 0), at(1, 1), at(-1, 1), at(1, -1), at(-1, -1)]
}

fn estimate_steps(mut range: f64, lat: f64) -> u32 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u32
}

#[derive(Clone, Copy)]
enum Shape {
    Circle { radius: f64 },
    Box { width: f64, height: f64 },
}

struct Search {
    center: [f64; 2],
    shape: Shape,
    /// Meters per unit.
    conversion: f64,
}

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// Redis's `geohashGetLatDistance`: along a meridian.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Redis's `geohashGetDistance` (haversine; along a meridian when the
/// longitudes are the same, which changes the last digits).
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    2.0 * EARTH_RADIUS * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

impl Search {
    /// Redis's `geohashBoundingBox`: [min lon, min lat, max lon, max lat].
    fn bounds(&self) -> [f64; 4] {
        let [lon, lat] = self.center;
        let (h, w) = match self.shape {
            Shape::Circle { radius } => (radius, radius),
            Shape::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let (h, w) = (h * self.conversion, w * self.conversion);
        let lat_delta = rad_deg(h / EARTH_RADIUS);
        let top = rad_deg(w / EARTH_RADIUS / deg_rad(lat + lat_delta).cos());
        let bottom = rad_deg(w / EARTH_RADIUS / deg_rad(lat - lat_delta).cos());
        let d = if lat < 0.0 { bottom } else { top };
        [lon - d, lat - lat_delta, lon + d, lat + lat_delta]
    }

    /// Redis's `geohashCalculateAreasByShapeWGS84`: the boxes to visit
    /// (zeroed ones are skipped).
    fn areas(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let [lon, lat] = self.center;
        let radius = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps(radius, lat);
        let mut hash = encode(WGS_LONG, WGS_LAT, lon, lat, steps).unwrap_or(ZERO);
        let mut n = neighbours(hash);
        let mut area = decode(hash, WGS_LONG, WGS_LAT);
        let (north, south) = (decode(n[1], WGS_LONG, WGS_LAT), decode(n[2], WGS_LONG, WGS_LAT));
        let (east, west) = (decode(n[3], WGS_LONG, WGS_LAT), decode(n[4], WGS_LONG, WGS_LAT));
        let decrease = north.lat.max < max_lat
            || south.lat.min > min_lat
            || east.lon.max < max_lon
            || west.lon.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            hash = encode(WGS_LONG, WGS_LAT, lon, lat, steps).unwrap_or(ZERO);
            n = neighbours(hash);
            area = decode(hash, WGS_LONG, WGS_LAT);
        }
        if steps >= 2 {
            // Drop the boxes that cannot hold a match.
            if area.lat.min < min_lat {
                for i in [2, 7, 8] {
                    n[i] = ZERO;
                }
            }
            if area.lat.max > max_lat {
                for i in [1, 5, 6] {
                    n[i] = ZERO;
                }
            }
            if area.lon.min < min_lon {
                for i in [4, 8, 6] {
                    n[i] = ZERO;
                }
            }
            if area.lon.max > max_lon {
                for i in [3, 7, 5] {
                    n[i] = ZERO;
                }
            }
        }
        n
    }

    /// Redis's `geoWithinShape`: the distance in meters when inside.
    fn within(&self, p: [f64; 2]) -> Option<f64> {
        let [x1, y1] = self.center;
        let [x2, y2] = p;
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(x1, y1, x2, y2);
                (d <= radius * self.conversion).then_some(d)
            }
            Shape::Box { width, height } => {
                // Redis's `geohashGetDistanceIfInRectangle`: latitude first.
                if lat_distance(y2, y1) > height * self.conversion / 2.0 {
                    return None;
                }
                if distance(x2, y2, x1, y2) > width * self.conversion / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, x2, y2))
            }
        }
    }
}

// ---- argument helpers --------------------------------------------------

/// Redis's `extractLongLatOrReply`.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let x = string2d(lon).ok_or(CmdError::NotFloat)?;
    let y = string2d(lat).ok_or(CmdError::NotFloat)?;
    if !(LONG_MIN..=LONG_MAX).contains(&x) || !(LAT_MIN..=LAT_MAX).contains(&y) {
        return Err(CmdError::Bytes(
            format!("ERR invalid longitude,latitude pair {x:.6},{y:.6}").into_bytes(),
        ));
    }
    Ok([x, y])
}

/// Meters per `unit` (`m`, `km`, `ft`, `mi`, any case).
fn unit(u: &[u8]) -> Result<f64, CmdError> {
    if eq_ic(u, "M") {
        Ok(1.0)
    } else if eq_ic(u, "KM") {
        Ok(1000.0)
    } else if eq_ic(u, "FT") {
        Ok(0.3048)
    } else if eq_ic(u, "MI") {
        Ok(1609.34)
    } else {
        Err(CmdError::err("unsupported unit provided. please use M, KM, FT, MI"))
    }
}

fn number(a: &[u8], what: &'static str) -> Result<f64, CmdError> {
    string2d(a).ok_or_else(|| CmdError::err(what))
}

/// `radius unit`: (radius, meters per unit).
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let d = number(r, "need numeric radius")?;
    if d < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((d, unit(u)?))
}

/// A distance as Redis 7.0.15 prints it (`fixedpoint_d2string` with four
/// digits: the value times 10^4 rounded half to even, then split; this
/// differs from `%.4f` on ties such as 8744126.74825).
fn reply_distance(out: &mut ReplyBuf, d: f64) {
    let scaled = (d * 10_000.0).round_ties_even() as i64;
    let (sign, v) = if scaled < 0 { ("-", scaled.unsigned_abs()) } else { ("", scaled as u64) };
    out.bulk(format!("{sign}{}.{:04}", v / 10_000, v % 10_000).as_bytes());
}

fn reply_coord(out: &mut ReplyBuf, v: f64) {
    let mut b = [0u8; LD_BUF];
    let n = ldouble::human_double(v, &mut b);
    if out.is_resp3() {
        out.raw(b",");
        out.raw(&b[..n]);
        out.raw(b"\r\n");
    } else {
        out.bulk(&b[..n]);
    }
}

/// The sorted set at `key` for reading (`None` if missing).
fn read_zset<'c>(cx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c ZSet>, CmdError> {
    match cx.lookup_read(key) {
        None => Ok(None),
        Some(e) => Ok(Some(&*as_zset(&mut e.value)?)),
    }
}

// ---- GEOADD ------------------------------------------------------------

fn geoadd(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let argv = args.argv();
    let (mut nx, mut xx) = (false, false);
    let mut first = 2;
    while first < argv.len() {
        let o = argv[first];
        if eq_ic(o, "NX") {
            nx = true;
        } else if eq_ic(o, "XX") {
            xx = true;
        } else if !eq_ic(o, "CH") {
            break;
        }
        first += 1;
    }
    if !(argv.len() - first).is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    // ZADD key [options] score member …, as Redis rewrites the command.
    let triples = &argv[first..];
    let mut scores: Vec<Vec<u8>> = Vec::with_capacity(triples.len() / 3);
    for t in triples.chunks(3) {
        let [lon, lat] = lon_lat(t[0], t[1])?;
        let h = encode(WGS_LONG, WGS_LAT, lon, lat, STEP_MAX).unwrap_or(ZERO);
        scores.push(align52(h).to_string().into_bytes());
    }
    let mut zargv: Vec<&[u8]> = Vec::with_capacity(first + scores.len() * 2);
    zargv.push(b"zadd");
    zargv.extend_from_slice(&argv[1..first]);
    for (t, s) in triples.chunks(3).zip(&scores) {
        zargv.push(s);
        zargv.push(t[2]);
    }
    cx.propagate_as(&zargv);
    super::zset::zadd(cx, &mut Args::new(&zargv, 1), out)
}

// ---- GEODIST, GEOHASH, GEOPOS -------------------------------------------

fn geodist(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let (a, b) = (args.req()?, args.req()?);
    let to_meter = match args.remaining() {
        0 => 1.0,
        1 => unit(args.req()?)?,
        _ => return Err(CmdError::Syntax),
    };
    let Some(z) = read_zset(cx, key)? else {
        out.null();
        return Ok(());
    };
    match (z.score(a), z.score(b)) {
        (Some(s1), Some(s2)) => {
            let [x1, y1] = decode_score(s1);
            let [x2, y2] = decode_score(s2);
            reply_distance(out, distance(x1, y1, x2, y2) / to_meter);
        }
        _ => out.null(),
    }
    Ok(())
}

fn geohash(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let key = args.key()?;
    let members = args.rest();
    let z = read_zset(cx, key)?;
    out.array(members.len());
    for m in members {
        let Some(score) = z.and_then(|z| z.score(m)) else {
            out.null();
            continue;
        };
        // Re-encoded with the standard latitude range, ±90.
        let [lon, lat] = decode_score(score);
        let full = Range { min: -90.0, max: 90.0 };
        let bits = encode(WGS_LONG, full, lon, lat, 26).map_or(0, |h| h.bits);
        let mut buf = [0u8; 11];
        for (i, c) in buf.iter_mut().enumerate() {
            let idx = if i == 10 { 0 } else { (bits >> (52 - (i + 1) * 5)) & 0x1f };
            *c = ALPHABET[idx as usize];
        }
        out.bulk(&buf);
    }
    Ok(())
}

fn geopos(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let key = args.key()?;
    let members = args.rest();
    let z = read_zset(cx, key)?;
    out.array(members.len());
    for m in members {
        match z.and_then(|z| z.score(m)) {
            None => out.null_array(),
            Some(score) => {
                let [lon, lat] = decode_score(score);
                out.array(2);
                reply_coord(out, lon);
                reply_coord(out, lat);
            }
        }
    }
    Ok(())
}

// ---- GEORADIUS*, GEOSEARCH* ----------------------------------------------

const COORDS: u8 = 1;
const MEMBER: u8 = 2;
const NOSTORE: u8 = 4;
const SEARCH: u8 = 8;
const SEARCHSTORE: u8 = 16;

fn georadius(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 1, COORDS)
}

fn georadiusbymember(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 1, MEMBER)
}

fn georadius_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 1, COORDS | NOSTORE)
}

fn georadiusbymember_ro(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 1, MEMBER | NOSTORE)
}

fn geosearch(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 1, SEARCH)
}

fn geosearchstore(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    radius_generic(cx, args.argv(), out, 2, SEARCH | SEARCHSTORE)
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

struct Point {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    xy: [f64; 2],
}

/// The member's position in `z`, or Redis's error.
fn member_pos(z: &ZSet, m: &[u8]) -> Result<[f64; 2], CmdError> {
    z.score(m)
        .map(decode_score)
        .ok_or_else(|| CmdError::err("could not decode requested zset member"))
}

/// Redis's `georadiusGeneric`, for all six commands.
fn radius_generic(
    cx: &mut Ctx,
    argv: &[&[u8]],
    out: &mut ReplyBuf,
    src: usize,
    flags: u8,
) -> CmdResult {
    let name = String::from_utf8_lossy(argv[0]).into_owned();
    let src_key = argv[src];
    // Parsing needs the sorted set (FROMMEMBER), and the search reads it;
    // it is copied out of the entry only as far as the search needs.
    let zexists;
    let mut center = [0.0; 2];
    let mut shape = None;
    let mut conversion = 1.0;
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base;
    {
        let z = read_zset(cx, src_key)?;
        zexists = z.is_some();
        if flags & COORDS != 0 {
            base = 6;
            center = lon_lat(argv[2], argv[3])?;
            let (r, c) = radius_arg(argv[4], argv[5])?;
            shape = Some(Shape::Circle { radius: r });
            conversion = c;
        } else if flags & MEMBER != 0 {
            base = 5;
            if let Some(z) = z {
                center = member_pos(z, argv[2])?;
                let (r, c) = radius_arg(argv[3], argv[4])?;
                shape = Some(Shape::Circle { radius: r });
                conversion = c;
            }
        } else if flags & SEARCHSTORE != 0 {
            base = 3;
            store = Some(argv[1]);
        } else {
            base = 2;
        }
    }
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let rest = &argv[base.min(argv.len())..];
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i];
        let left = rest.len() - i - 1;
        let search = flags & SEARCH != 0;
        let may_store = flags & NOSTORE == 0 && !search;
        if eq_ic(a, "WITHDIST") {
            withdist = true;
        } else if eq_ic(a, "WITHHASH") {
            withhash = true;
        } else if eq_ic(a, "WITHCOORD") {
            withcoord = true;
        } else if eq_ic(a, "ANY") {
            any = true;
        } else if eq_ic(a, "ASC") {
            sort = Sort::Asc;
        } else if eq_ic(a, "DESC") {
            sort = Sort::Desc;
        } else if eq_ic(a, "COUNT") && left >= 1 {
            count = parse_i64(rest[i + 1])?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if eq_ic(a, "STORE") && left >= 1 && may_store {
            store = Some(rest[i + 1]);
            storedist = false;
            i += 1;
        } else if eq_ic(a, "STOREDIST") && left >= 1 && may_store {
            store = Some(rest[i + 1]);
            storedist = true;
            i += 1;
        } else if eq_ic(a, "STOREDIST") && search && flags & SEARCHSTORE != 0 {
            storedist = true;
        } else if eq_ic(a, "FROMMEMBER") && left >= 1 && search && !fromloc {
            if zexists {
                let z = read_zset_quiet(cx, src_key).expect("exists");
                center = member_pos(z, rest[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if eq_ic(a, "FROMLONLAT") && left >= 2 && search && !frommember {
            center = lon_lat(rest[i + 1], rest[i + 2])?;
            fromloc = true;
            i += 2;
        } else if eq_ic(a, "BYRADIUS") && left >= 2 && search && !bybox {
            let (r, c) = radius_arg(rest[i + 1], rest[i + 2])?;
            shape = Some(Shape::Circle { radius: r });
            conversion = c;
            byradius = true;
            i += 2;
        } else if eq_ic(a, "BYBOX") && left >= 3 && search && !byradius {
            let w = number(rest[i + 1], "need numeric width")?;
            let h = number(rest[i + 2], "need numeric height")?;
            if h < 0.0 || w < 0.0 {
                return Err(CmdError::err("height or width cannot be negative"));
            }
            conversion = unit(rest[i + 3])?;
            shape = Some(Shape::Box { width: w, height: h });
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let what =
            if flags & SEARCHSTORE != 0 { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::err(format!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if flags & SEARCH != 0 && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if flags & SEARCH != 0 && !(byradius || bybox) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    if !zexists {
        match store {
            Some(dst) => {
                // No source: no result, so no event of the command's.
                cx.store_or_delete(dst, None, Class::ZSET, "georadiusstore", 0);
                out.int(0);
            }
            None => out.array(0),
        }
        return Ok(());
    }
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let search = Search { center, shape: shape.expect("set when the key exists"), conversion };
    let limit = if any { count as usize } else { 0 };
    let mut points: Vec<Point> = Vec::new();
    {
        let z = read_zset_quiet(cx, src_key).expect("exists");
        let boxes = search.areas();
        let mut last: Option<usize> = None;
        for (i, b) in boxes.iter().enumerate() {
            if *b == ZERO {
                continue;
            }
            if last.is_some_and(|l| boxes[l] == *b) {
                continue;
            }
            if limit > 0 && points.len() >= limit {
                break;
            }
            let min = align52(*b) as f64;
            let max = align52(Hash { bits: b.bits + 1, step: b.step }) as f64;
            let (lo, hi) = z.score_span(min, false, max, true);
            for (m, s) in z.range(lo, hi, false) {
                let xy = decode_score(s);
                if let Some(dist) = search.within(xy) {
                    points.push(Point { member: m.to_vec(), score: s, dist, xy });
                }
                if limit > 0 && points.len() >= limit {
                    break;
                }
            }
            last = Some(i);
        }
    }
    if points.is_empty() && store.is_none() {
        out.array(0);
        return Ok(());
    }
    let returned = if count == 0 { points.len() } else { points.len().min(count as usize) };
    match sort {
        Sort::None => {}
        Sort::Asc => points.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => points.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
    }
    points.truncate(returned);
    for p in &mut points {
        p.dist /= conversion;
    }
    match store {
        None => {
            let opts = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
            out.array(points.len());
            for p in &points {
                if opts > 0 {
                    out.array(opts + 1);
                }
                out.bulk(&p.member);
                if withdist {
                    reply_distance(out, p.dist);
                }
                if withhash {
                    out.int(p.score as i64);
                }
                if withcoord {
                    out.array(2);
                    reply_coord(out, p.xy[0]);
                    reply_coord(out, p.xy[1]);
                }
            }
        }
        Some(dst) => {
            let result = (!points.is_empty()).then(|| {
                let lim = limits(cx);
                let mut z = ZSet::new_skiplist();
                let mut maxlen = 0;
                for p in &points {
                    maxlen = maxlen.max(p.member.len());
                    z.set(&p.member, if storedist { p.dist } else { p.score }, lim);
                }
                z.shrink_if_small(maxlen, lim);
                Value::ZSet(z)
            });
            let event = if flags & SEARCH != 0 { "geosearchstore" } else { "georadiusstore" };
            cx.store_or_delete(dst, result, Class::ZSET, event, points.len() as u64);
            out.int(points.len() as i64);
        }
    }
    Ok(())
}

/// The sorted set again, without counting a second keyspace hit.
fn read_zset_quiet<'c>(cx: &'c mut Ctx, key: &[u8]) -> Option<&'c ZSet> {
    match cx.lookup(key) {
        Some(e) => match &e.value {
            Value::ZSet(z) => Some(z),
            _ => None,
        },
        None => None,
    }
}
