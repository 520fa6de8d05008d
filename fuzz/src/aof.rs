//! The AOF loader's decoding on arbitrary bytes: the manifest parser, the
//! command-stream reader the server loads with (after an RDB preamble when
//! the bytes start with one) and the strict checker of `sluice-check-aof`.
//! Every input is read to its end or refused with an error, never a panic,
//! a hang or an unbounded allocation; the reader's offsets only move
//! forward and stay inside the input; and read as the server loads a file
//! (`read_stream`, in reads of a few bytes), it gives the same items and
//! the same ending.
use persist::aof::{check, read_stream, CommandReader, Item, Manifest, StreamError, StreamStop};

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(m) = Manifest::parse(data) {
        // What renders parses back to the same manifest — when its lines
        // fit what the reader takes: a name is written escaped (four
        // characters a byte outside printable ASCII, as Redis's
        // sdscatrepr writes it), so a line read at the limit can render
        // past it, in Redis's format as in ours.
        let text = m.render();
        if text.lines().all(|l| l.len() < persist::aof::LINE_MAX) {
            let again = Manifest::parse(text.as_bytes());
            assert_eq!(again.ok().as_ref(), (!text.is_empty()).then_some(&m));
        }
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
    let mut whole = Vec::new();
    let ending = loop {
        match r.next_item() {
            Ok(Some(item)) => {
                let end = match &item {
                    Item::Command { argv, end } => {
                        assert!(!argv.is_empty());
                        *end
                    }
                    Item::Annotation { end, .. } => *end,
                };
                assert!(end > last && end <= data.len());
                last = end;
                whole.push(format!("{item:?}"));
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let step = 1 + data.last().map_or(0, |&b| b as usize % 61);
    let mut streamed = Vec::new();
    let res = read_stream(&mut &data[start..], start, step, |item| {
        streamed.push(format!("{item:?}"));
        Ok::<(), ()>(())
    });
    let streamed_ending: Option<StreamError> = match res {
        Ok(()) => None,
        Err(StreamStop::Stream(e)) => Some(e),
        Err(e) => panic!("{e:?}"),
    };
    assert_eq!((streamed, streamed_ending), (whole, ending));
    let c = check("fuzz", data, start, 1, 1_700_000_000);
    assert!(c.ok_up_to <= data.len());
}
