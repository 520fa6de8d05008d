//! Property tests of the request parser (the fuzz target in `fuzz/` runs
//! the same checks coverage-guided): arbitrary bytes never panic, and a
//! stream of valid requests parses to the same arguments however it is
//! split across reads.

use proptest::prelude::*;
use resp::{parse, ArgBuf, Limits, Parsed};

type Requests = Vec<Vec<Vec<u8>>>;

/// Parses every complete request; returns them, the bytes used, and
/// whether a protocol error stopped the parse.
fn parse_all(data: &[u8]) -> (Requests, usize, bool) {
    let mut args = ArgBuf::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let limits = Limits::default();
    while pos < data.len() {
        match parse(&data[pos..], &limits, &mut args) {
            Parsed::Command { consumed } => {
                let input = &data[pos..];
                out.push((0..args.len()).map(|i| args.get(input, i).to_vec()).collect());
                pos += consumed;
            }
            Parsed::Empty { consumed } => pos += consumed,
            Parsed::Incomplete { need } => {
                assert!(need > data.len() - pos, "need must ask for more than is there");
                return (out, pos, false);
            }
            Parsed::Error(_) => return (out, pos, true),
        }
    }
    (out, pos, false)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_all(&data);
    }

    #[test]
    fn arbitrary_bytes_after_a_star_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut d = b"*".to_vec();
        d.extend(data);
        let _ = parse_all(&d);
    }

    #[test]
    fn valid_stream_parses_the_same_at_any_split(
        cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..5), 1..8),
        split in any::<prop::sample::Index>(),
    ) {
        let mut wire = Vec::new();
        for c in &cmds {
            resp::write_command(&mut wire, c);
        }
        let (all, used, err) = parse_all(&wire);
        prop_assert!(!err);
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(&all, &cmds);
        // A partial read first, then the rest appended, as a connection sees it.
        let cut = split.index(wire.len() + 1);
        let (mut got, pos, _) = parse_all(&wire[..cut]);
        let (second, _, _) = parse_all(&wire[pos..]);
        got.extend(second);
        prop_assert_eq!(got, cmds);
    }
}
