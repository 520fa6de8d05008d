//! Properties of the codec: values of every type survive DUMP → RESTORE
//! and a whole file unchanged, and mutated or truncated files and payloads
//! are refused or loaded, never a panic (the coverage-guided version is
//! `fuzz/fuzz_targets/rdb_load.rs`).

use persist::file::{self, Aux, Writer};
use persist::{Limits, PayloadError};
use proptest::prelude::*;
use store::types::list::List;
use store::types::set::Set;
use store::types::stream::{Nack, Stream, StreamId};
use store::types::zset::ZSet;
use store::types::Hash;
use store::Value;

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        (0u8..4, 0usize..300).prop_map(|(b, n)| vec![b'a' + b; n]),
    ]
}

/// A stream of several nodes (ids whose seq may fall below the master's),
/// tombstones, and groups with pending entries owned by consumers.
fn stream() -> impl Strategy<Value = Value> {
    type Spec = (Vec<(Vec<u8>, Vec<u8>)>, bool, u64);
    let entry = (proptest::collection::vec((bytes(), bytes()), 1..4), any::<bool>(), 0u64..3);
    (
        proptest::collection::vec(entry, 1..250),
        1u64..40,
        proptest::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..4),
    )
        .prop_map(|(entries, max_entries, groups): (Vec<Spec>, u64, _)| {
            let mut s = Stream::new();
            let mut id = StreamId::new(1, 5);
            let mut ids = Vec::new();
            for (i, (pairs, _, dms)) in entries.iter().enumerate() {
                id = if *dms == 0 {
                    StreamId::new(id.ms, id.seq + 1)
                } else {
                    StreamId::new(id.ms + dms, (i % 3) as u64)
                };
                let flat: Vec<&[u8]> = pairs.iter().flat_map(|(f, v)| [&f[..], &v[..]]).collect();
                s.append(id, &flat, 4096, max_entries);
                ids.push(id);
            }
            for (i, (_, del, _)) in entries.iter().enumerate() {
                if *del && s.delete(ids[i]) {
                    s.max_deleted = s.max_deleted.max(ids[i]);
                }
            }
            s.refresh_first_id();
            for (k, (at, invalid)) in groups.iter().enumerate() {
                let upto = at.index(ids.len());
                let name = format!("g{k}");
                let read = if *invalid { -1 } else { upto as i64 };
                s.create_group(name.as_bytes(), ids[upto], read);
                let g = s.group_mut(name.as_bytes()).unwrap();
                for (j, pid) in ids[..=upto].iter().enumerate().step_by(k + 1) {
                    let c: &[u8] = if j % 2 == 0 { b"alice" } else { b"bob" };
                    g.ensure_consumer(c, 1_700_000_000_000 + j as i64);
                    let nack = Nack {
                        delivery_time: j as i64,
                        delivery_count: 1 + j as u64,
                        consumer: c.into(),
                    };
                    g.pel.insert(*pid, nack);
                    g.consumers.get_mut(c).unwrap().pel.insert(*pid);
                }
                g.ensure_consumer(b"idle", -5);
            }
            Value::Stream(Box::new(s))
        })
}

fn value() -> impl Strategy<Value = Value> {
    let lim = Limits::default();
    prop_oneof![
        stream(),
        bytes().prop_map(|b| Value::from_arg(&b)),
        proptest::collection::vec(bytes(), 1..200).prop_map(move |v| {
            let mut l = List::new(lim.list_fill);
            for e in v {
                l.push_back(&e);
            }
            Value::List(Box::new(l))
        }),
        proptest::collection::vec((bytes(), bytes()), 1..200).prop_map(move |v| {
            let mut h = Hash::new();
            for (f, x) in v {
                h.set(&f, &x, lim.hash_max_entries, lim.hash_max_value);
            }
            Value::Hash(h)
        }),
        proptest::collection::vec(bytes(), 1..600).prop_map(move |v| {
            let mut s = Set::new_ints();
            for m in v {
                s.add(&m, lim.set_max_intset);
            }
            Value::Set(s)
        }),
        proptest::collection::vec((bytes(), -1e6f64..1e6), 1..200).prop_map(move |v| {
            let mut z = ZSet::new_listpack();
            for (m, sc) in v {
                z.set(&m, sc, lim.zset);
            }
            Value::ZSet(z)
        }),
    ]
}

/// Values compare by content; encodings too, as loading keeps Redis's.
fn same(a: &Value, b: &Value) -> bool {
    a.encoding() == b.encoding() && a == b
}

fn file_of(values: &[(Vec<u8>, Value, i64)], compress: bool) -> Vec<u8> {
    let aux = [("redis-ver", Aux::Str("7.0.15")), ("redis-bits", Aux::Int(64))];
    let mut w = Writer::new(Vec::new(), &aux, compress, true);
    w.select_db(0, values.len(), 0).unwrap();
    for (k, v, e) in values {
        w.key(k, v, *e).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Function library records: written, read back in order (compressed
    /// or not), and under mutation and truncation refused or read, never a
    /// panic, in a file and in a FUNCTION RESTORE payload.
    #[test]
    fn function_records_round_trip_and_survive_mutation(
        codes in proptest::collection::vec(bytes(), 0..4),
        compress in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let aux = [("redis-ver", Aux::Str("7.0.15"))];
        let mut w = Writer::new(Vec::new(), &aux, compress, true);
        for c in &codes {
            w.function(c).unwrap();
        }
        let mut f = w.finish().unwrap();
        let loaded = file::load(&f, &Limits::default(), 16, 0, true, |_| Ok(())).unwrap();
        prop_assert_eq!(&loaded.functions, &codes);
        prop_assert_eq!(&file::leading_functions(&f), &codes);
        let p = persist::functions::dump_payload(codes.iter().map(|c| &c[..]), compress);
        prop_assert_eq!(&persist::functions::restore_payload(&p, true).unwrap(), &codes);
        let mut q = p.clone();
        for (at, b) in &edits {
            let i = at.index(f.len());
            f[i] = *b;
            let j = at.index(q.len());
            q[j] = *b;
        }
        let _ = file::load(&f, &Limits::default(), 16, 0, false, |_| Ok(()));
        let _ = file::leading_functions(&f);
        let _ = file::leading_functions(&f[..cut.index(f.len())]);
        let _ = persist::functions::restore_payload(&q, false);
        let _ = persist::functions::restore_payload(&q[..cut.index(q.len())], false);
    }

    #[test]
    fn dump_restore_round_trip(v in value(), compress in any::<bool>()) {
        let p = persist::dump(&v, compress);
        let back = persist::restore(&p, &Limits::default(), true).unwrap();
        prop_assert!(same(&v, &back), "{:?} vs {:?}", v, back);
    }

    #[test]
    fn files_round_trip(vals in proptest::collection::vec((bytes(), value(), prop_oneof![Just(-1i64), 1i64..i64::MAX/2]), 1..8), compress in any::<bool>()) {
        let mut seen = std::collections::HashSet::new();
        let vals: Vec<_> = vals.into_iter().filter(|(k, _, _)| seen.insert(k.clone())).collect();
        let f = file_of(&vals, compress);
        let mut got = Vec::new();
        let info = file::load(&f, &Limits::default(), 16, 0, true, |k| {
            got.push((k.key.to_vec(), k.value, k.expire_at));
            Ok(())
        }).unwrap();
        prop_assert_eq!(info.keys_loaded as usize, vals.len());
        for ((k1, v1, e1), (k2, v2, e2)) in vals.iter().zip(&got) {
            prop_assert_eq!(k1, k2);
            prop_assert_eq!(e1, e2);
            prop_assert!(same(v1, v2));
        }
    }

    /// A file fed to the streaming loader in pieces of any sizes (as a
    /// replica's diskless load meets its master's payload) loads the same
    /// keys as the whole file, and a damaged one gets the same verdict
    /// and reason.
    #[test]
    fn files_fed_in_pieces_load_as_whole_files(
        vals in proptest::collection::vec((bytes(), value(), prop_oneof![Just(-1i64), 1i64..i64::MAX/2]), 1..6),
        compress in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        edit in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
    ) {
        let mut seen = std::collections::HashSet::new();
        let vals: Vec<_> = vals.into_iter().filter(|(k, _, _)| seen.insert(k.clone())).collect();
        let mut f = file_of(&vals, compress);
        if let Some((at, b)) = edit {
            let i = at.index(f.len());
            f[i] = b;
        }
        let mut whole = Vec::new();
        let w = file::load(&f, &Limits::default(), 16, 0, true, |k| {
            whole.push((k.key.to_vec(), k.value, k.expire_at));
            Ok(())
        });
        let mut ends: Vec<usize> = cuts.iter().map(|c| c.index(f.len())).collect();
        ends.push(f.len());
        ends.sort_unstable();
        let mut l = file::Loader::new(Limits::default(), 16, 0, true);
        let mut pieces = Vec::new();
        let mut sink = |k: file::LoadedKey<'_>| {
            pieces.push((k.key.to_vec(), k.value, k.expire_at));
            Ok(())
        };
        let mut from = 0;
        let mut streamed = Ok(());
        for &end in &ends {
            match l.feed(&f[from..end], end == f.len(), &mut sink) {
                Ok(n) => from += n,
                Err(e) => {
                    streamed = Err(e);
                    break;
                }
            }
        }
        match (w, streamed) {
            (Ok(info), Ok(())) => {
                prop_assert!(l.done());
                prop_assert_eq!(l.finish().consumed, info.consumed);
                prop_assert_eq!(whole.len(), pieces.len());
                for ((k1, v1, e1), (k2, v2, e2)) in whole.iter().zip(&pieces) {
                    prop_assert_eq!(k1, k2);
                    prop_assert_eq!(e1, e2);
                    prop_assert!(same(v1, v2));
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.reason, b.reason),
            (a, b) => prop_assert!(false, "whole {:?}, in pieces {:?}", a.map(|_| ()), b),
        }
    }

    #[test]
    fn mutated_files_are_refused_or_loaded_never_a_panic(
        vals in proptest::collection::vec((bytes(), value()), 1..4),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let vals: Vec<_> = vals.into_iter().map(|(k, v)| (k, v, -1)).collect();
        let mut f = file_of(&vals, true);
        for (at, b) in &edits {
            let i = at.index(f.len());
            f[i] = *b;
        }
        let _ = file::load(&f, &Limits::default(), 16, 0, false, |_| Ok(()));
        let _ = file::load(&f[..cut.index(f.len())], &Limits::default(), 16, 0, false, |_| Ok(()));
        // The same edits inside a payload whose checksum is recomputed, so
        // they reach the value decoders.
        let mut p = persist::dump(&vals[0].1, true);
        let n = p.len();
        for (at, b) in &edits {
            let i = at.index(n - 10);
            p[i] = *b;
        }
        let crc = persist::crc64::crc64(0, &p[..n - 8]);
        p[n - 8..].copy_from_slice(&crc.to_le_bytes());
        match persist::restore(&p, &Limits::default(), true) {
            Ok(_) | Err(PayloadError::BadFormat) => {}
            Err(e) => prop_assert!(false, "{:?}", e),
        }
    }
}

#[test]
fn a_wrong_checksum_is_refused_with_its_offset() {
    let f = file_of(&[(b"k".to_vec(), Value::from_arg(b"v"), -1)], true);
    let mut bad = f.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    let e = file::load(&bad, &Limits::default(), 16, 0, true, |_| Ok(())).unwrap_err();
    assert_eq!(e.reason, "RDB CRC error");
    assert_eq!(e.offset, n - 8);
    let short = file::load(&f[..n - 9], &Limits::default(), 16, 0, true, |_| Ok(())).unwrap_err();
    assert_eq!(short.reason, "unexpected end of data");
}

#[test]
fn huge_declared_lengths_fail_fast() {
    // A list claiming 2^62 nodes, a string claiming 4 GiB, LZF claiming a
    // huge expansion: each is an error after reading what is there.
    for body in [
        vec![18u8, 0x81, 0x40, 0, 0, 0, 0, 0, 0, 0],
        vec![0u8, 0x80, 0xff, 0xff, 0xff, 0xff, b'x'],
        vec![0u8, 0xC3, 2, 0x80, 0x7f, 0xff, 0xff, 0xff, 0, b'a'],
    ] {
        let mut p = body.clone();
        p.extend_from_slice(&[10, 0]);
        let crc = persist::crc64::crc64(0, &p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(persist::restore(&p, &Limits::default(), true), Err(PayloadError::BadFormat));
    }
}

#[test]
fn the_check_tool_reports_contents_and_damage() {
    let dir = std::env::temp_dir().join(format!("sluice-check-rdb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = file_of(
        &[(b"a".to_vec(), Value::from_arg(b"1"), -1), (b"b".to_vec(), Value::from_arg(b"x"), 5)],
        true,
    );
    let run = |bytes: &[u8]| {
        let p = dir.join("f.rdb");
        std::fs::write(&p, bytes).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-check-rdb"))
            .arg(&p)
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, text) = run(&good);
    assert!(ok, "{text}");
    assert!(text.contains("[info] DB 0: 2 keys, 1 with an expiry"), "{text}");
    assert!(text.contains("[info] 2 string keys"), "{text}");
    assert!(text.contains("AUX FIELD redis-ver = '7.0.15'"), "{text}");
    let (ok, text) = run(&good[..good.len() - 12]);
    assert!(!ok);
    assert!(text.contains("--- RDB ERROR DETECTED ---"), "{text}");
    assert!(text.contains("unexpected end of data"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn idle_times_round_trip() {
    let mut out = b"REDIS0010".to_vec();
    file::encode_key(&mut out, b"k", &Value::from_arg(b"v"), -1, Some(1234), true);
    out.push(file::op::EOF);
    out.extend_from_slice(&[0; 8]);
    let mut seen = None;
    file::load(&out, &Limits::default(), 16, 0, true, |k| {
        seen = Some((k.key.to_vec(), k.idle, k.freq));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, Some((b"k".to_vec(), Some(1234), None)));
}
