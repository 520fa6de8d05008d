//! The AOF loader's decoding on arbitrary bytes: the manifest parser, the
//! command-stream reader the server loads with (after an RDB preamble when
//! the bytes start with one) and the strict checker of `sluice-check-aof`.
//! Every input is read to its end or refused with an error, never a panic,
//! a hang or an unbounded allocation; the reader's offsets only move
//! forward and stay inside the input.
use persist::aof::{check, CommandReader, Item, Manifest};

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(m) = Manifest::parse(data) {
        // What renders parses back to the same manifest.
        let again = Manifest::parse(m.render().as_bytes());
        assert_eq!(again.ok().as_ref(), (!m.render().is_empty()).then_some(&m));
    }
    let mut start = 0;
    if persist::aof::is_rdb(data) {
        let lim = persist::Limits::default();
        match persist::file::load(data, &lim, 16, 0, false, |_| Ok(())) {
            Ok(l) => start = l.consumed,
            Err(_) => return,
        }
    }
    let mut r = CommandReader::new(data, start);
    let mut last = start;
    while let Ok(Some(item)) = r.next_item() {
        let end = match item {
            Item::Command { argv, end } => {
                assert!(!argv.is_empty());
                end
            }
            Item::Annotation { end, .. } => end,
        };
        assert!(end > last && end <= data.len());
        last = end;
    }
    let c = check("fuzz", data, start, 1, 1_700_000_000);
    assert!(c.ok_up_to <= data.len());
}
