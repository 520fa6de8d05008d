//! Fuzzes the request parser: any bytes must give a request, an empty
//! request, "incomplete" or a protocol error — never a panic — and feeding
//! the same bytes in two pieces must parse the same requests.
use resp::{parse, ArgBuf, Limits, Parsed};

fn requests(data: &[u8], limits: &Limits) -> Vec<Vec<Vec<u8>>> {
    let mut args = ArgBuf::new();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match parse(&data[pos..], limits, &mut args) {
            Parsed::Command { consumed } => {
                assert!(consumed > 0 && pos + consumed <= data.len());
                let input = &data[pos..];
                out.push((0..args.len()).map(|i| args.get(input, i).to_vec()).collect());
                pos += consumed;
            }
            Parsed::Empty { consumed } => {
                assert!(consumed > 0);
                pos += consumed;
            }
            Parsed::Incomplete { need } => {
                assert!(need > data.len() - pos);
                break;
            }
            Parsed::Error(e) => {
                assert!(e.reply_text().starts_with(b"ERR Protocol error: "));
                break;
            }
        }
    }
    out
}

/// One input.
pub fn run(data: &[u8]) {
    let limits = Limits { max_bulk_len: 1 << 20, unauthenticated: data.first() == Some(&0) };
    let _ = requests(data, &limits);
}
