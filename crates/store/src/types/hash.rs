//! The hash value type and its encodings.
//!
//! Placeholder: the data-types work fills this in (compact encoding while
//! small, converted at Redis's thresholds, as DESIGN.md §5 says).

/// A hash value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hash {
    _private: (),
}

impl Hash {
    /// Number of elements.
    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        "listpack"
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        0
    }
}
