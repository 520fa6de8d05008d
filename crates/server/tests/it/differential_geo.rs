//! Randomized differential test of the geo commands: seeded random points
//! (clustered around a few centres, and spread over the globe, poles and
//! the antimeridian included) are added to a sorted set on redis-server
//! and on Sluice, then random GEORADIUS, GEORADIUSBYMEMBER and GEOSEARCH
//! queries (circles and boxes, every unit, COUNT with and without ANY,
//! ASC/DESC or unsorted, WITH* options, STORE/STOREDIST) must answer byte
//! for byte the same: the same members, in the same order (unsorted
//! replies follow the order of the geohash boxes searched), with the same
//! distances, hashes and coordinates. `GEO_CASES` changes the number of
//! rounds.

use std::path::Path;

use testkit::diff::Servers;
use testkit::escape;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
}

const CENTRES: &[(f64, f64)] =
    &[(13.36, 38.11), (-0.12, 51.5), (179.9, 0.0), (-179.95, -10.0), (10.0, 84.9), (0.0, -84.0)];

#[test]
fn random_geo_queries_match_redis() {
    let Some(servers) = Servers::start(Path::new(env!("CARGO_BIN_EXE_sluice-server"))) else {
        return;
    };
    let mut p = servers.connect();
    let rounds: u64 = std::env::var("GEO_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let s = |v: &[String]| v.to_vec();
    // Queries that found something: the test must not pass on empty replies.
    let (mut found, mut asked) = (0, 0);
    for round in 0..rounds {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (round + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
        p.both(&s(&["FLUSHALL".into()])).unwrap();
        // Some rounds stay small enough for the listpack encoding.
        let n = if round.is_multiple_of(3) { 60 } else { 400 };
        let (clon, clat) = CENTRES[(rng.next() % CENTRES.len() as u64) as usize];
        let mut args = vec!["GEOADD".to_string(), "g".into()];
        for i in 0..n {
            let (lon, lat) = if rng.next().is_multiple_of(4) {
                (rng.range(-180.0, 180.0), rng.range(-85.05, 85.05))
            } else {
                let spread = rng.pick(&["0.01", "0.5", "5", "30"]).parse::<f64>().unwrap();
                (
                    (clon + rng.range(-spread, spread)).clamp(-180.0, 180.0),
                    (clat + rng.range(-spread, spread)).clamp(-85.05, 85.05),
                )
            };
            args.push(format!("{lon:.6}"));
            args.push(format!("{lat:.6}"));
            args.push(format!("m{i}"));
        }
        let (a, b) = p.both(&args).unwrap();
        assert_eq!(escape(&a), escape(&b), "GEOADD");
        for q in 0..40u32 {
            let unit = rng.pick(&["m", "km", "mi", "ft", "KM"]);
            let size = rng.pick(&["0", "1", "50", "500", "3000", "20000", "9000000"]);
            let meters = size.parse::<f64>().unwrap()
                * match unit {
                    "m" => 1.0,
                    "ft" => 0.3048,
                    "mi" => 1609.34,
                    _ => 1000.0,
                };
            // Keep most searches to a sensible area.
            let size = if meters > 3.0e6 && !q.is_multiple_of(4) {
                "300".to_string()
            } else {
                size.to_string()
            };
            let from_member = rng.next().is_multiple_of(3);
            let (lon, lat) = (
                (clon + rng.range(-2.0, 2.0)).clamp(-180.0, 180.0),
                (clat + rng.range(-2.0, 2.0)).clamp(-85.05, 85.05),
            );
            let member = format!("m{}", rng.next() % (n + 5));
            let mut cmd: Vec<String> = match rng.next() % 3 {
                0 if from_member => {
                    vec!["GEORADIUSBYMEMBER".into(), "g".into(), member, size.clone(), unit.into()]
                }
                0 => vec![
                    "GEORADIUS".into(),
                    "g".into(),
                    format!("{lon:.5}"),
                    format!("{lat:.5}"),
                    size.clone(),
                    unit.into(),
                ],
                _ => {
                    let mut c = vec!["GEOSEARCH".into(), "g".into()];
                    if from_member {
                        c.extend(["FROMMEMBER".into(), member]);
                    } else {
                        c.extend(["FROMLONLAT".into(), format!("{lon:.5}"), format!("{lat:.5}")]);
                    }
                    if rng.next().is_multiple_of(2) {
                        c.extend(["BYRADIUS".into(), size.clone(), unit.into()]);
                    } else {
                        let h = rng.pick(&["1", "100", "2000", "40000"]).to_string();
                        c.extend(["BYBOX".into(), size.clone(), h, unit.into()]);
                    }
                    c
                }
            };
            let store = cmd[0] != "GEOSEARCH" && rng.next().is_multiple_of(6);
            if store {
                cmd.extend([rng.pick(&["STORE", "STOREDIST"]).into(), "dst".into()]);
            } else {
                for w in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                    if rng.next().is_multiple_of(2) {
                        cmd.push(w.into());
                    }
                }
            }
            match rng.next() % 4 {
                0 => cmd.push("ASC".into()),
                1 => cmd.push("DESC".into()),
                _ => {}
            }
            if rng.next().is_multiple_of(3) {
                cmd.extend(["COUNT".into(), rng.pick(&["1", "3", "10", "1000"]).into()]);
                if rng.next().is_multiple_of(3) {
                    cmd.push("ANY".into());
                }
            }
            let (a, b) = p.both(&cmd).unwrap();
            assert_eq!(escape(&b), escape(&a), "round {round} query {q}: {cmd:?}");
            asked += 1;
            if a.len() > 4 && !a.starts_with(b"-") && a != b":0\r\n" {
                found += 1;
            }
            if store {
                let z = vec![
                    "ZRANGE".to_string(),
                    "dst".into(),
                    "0".into(),
                    "-1".into(),
                    "WITHSCORES".into(),
                ];
                let (a, b) = p.both(&z).unwrap();
                assert_eq!(escape(&b), escape(&a), "round {round} stored by {cmd:?}");
            }
        }
        for m in ["m1", "m7", "nope"] {
            for c in [
                vec!["GEOPOS", "g", m],
                vec!["GEOHASH", "g", m],
                vec!["GEODIST", "g", "m0", m, "km"],
            ] {
                let c: Vec<String> = c.into_iter().map(String::from).collect();
                let (a, b) = p.both(&c).unwrap();
                assert_eq!(escape(&b), escape(&a), "{c:?}");
            }
        }
    }
    assert!(found * 3 > asked, "only {found} of {asked} queries found members");
}
