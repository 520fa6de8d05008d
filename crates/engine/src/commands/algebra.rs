//! The sources of the multi-key set algebra, shared by the set family
//! (SINTER SUNION SDIFF, their STORE forms, SINTERCARD) and the sorted-set
//! family (ZUNION ZINTER ZDIFF, their STORE forms, ZINTERCARD).
//!
//! The handler context hands out one entry at a time, so [`Sources::gather`]
//! moves each source value out of its entry (a pointer move; the stripes
//! are locked, nobody else can look) and [`Sources::restore`] puts them
//! back before any key is written. A key named twice is looked up twice
//! (as Redis counts it) and refers to its first argument. Each family
//! says which values it takes ([`Operand`]) and keeps its own walk, since
//! Redis's `t_set.c` and `t_zset.c` choose their algorithms differently.

use resp::ReplyBuf;
use store::Value;

use crate::core::ctx::Ctx;
use crate::core::effects::Class;
use crate::core::error::CmdError;

/// A value a family's algebra takes as input.
pub(crate) trait Operand: Sized {
    /// Takes `v` if it is an input of the family; gives it back otherwise.
    fn take(v: Value) -> Result<Self, Value>;
    /// The value to put back in the entry.
    fn into_value(self) -> Value;
    /// The cardinality.
    fn len(&self) -> usize;
}

/// One source key.
enum Src<T> {
    Missing,
    /// The value, moved out of its entry until [`Sources::restore`].
    Own(T),
    /// The same key as an earlier argument (its index).
    Same(usize),
}

/// The source keys of one command, their values moved out.
pub(crate) struct Sources<'k, T> {
    keys: &'k [&'k [u8]],
    srcs: Vec<Src<T>>,
}

impl<'k, T: Operand> Sources<'k, T> {
    /// Looks every key up as Redis's `lookupKeyRead` does (hits, misses,
    /// lazy expiry, in argument order) and moves the values out. On a
    /// value the family does not take, everything taken so far is put
    /// back and the command fails with WRONGTYPE.
    pub(crate) fn gather(cx: &mut Ctx, keys: &'k [&'k [u8]]) -> Result<Self, CmdError> {
        let mut s = Sources { keys, srcs: Vec::with_capacity(keys.len()) };
        for (j, &k) in keys.iter().enumerate() {
            if let Some(i) = keys[..j].iter().position(|&p| p == k) {
                // Counted again, as Redis looks a repeated key up again.
                cx.lookup_read(k);
                s.srcs.push(Src::Same(i));
                continue;
            }
            let src = match cx.lookup_read(k) {
                None => Src::Missing,
                Some(e) => match T::take(std::mem::replace(&mut e.value, Value::Int(0))) {
                    Ok(v) => Src::Own(v),
                    Err(other) => {
                        e.value = other;
                        s.restore(cx);
                        return Err(CmdError::WrongType);
                    }
                },
            };
            s.srcs.push(src);
        }
        Ok(s)
    }

    /// Puts the values back into their entries.
    pub(crate) fn restore(self, cx: &mut Ctx) {
        let db = cx.db;
        for (k, src) in self.keys.iter().zip(self.srcs) {
            if let Src::Own(v) = src {
                if let Some(e) = cx.keys.get(db, k) {
                    e.value = v.into_value();
                }
            }
        }
    }

    /// How many source keys (arguments) there are.
    pub(crate) fn count(&self) -> usize {
        self.keys.len()
    }

    /// The value of source `j` (`None` for a missing key).
    pub(crate) fn get(&self, j: usize) -> Option<&T> {
        match &self.srcs[j] {
            Src::Missing => None,
            Src::Own(v) => Some(v),
            Src::Same(i) => self.get(*i),
        }
    }

    /// The argument index that owns source `j` (the key's identity).
    pub(crate) fn origin(&self, j: usize) -> usize {
        match self.srcs[j] {
            Src::Same(i) => i,
            _ => j,
        }
    }

    /// The cardinality of source `j` (0 when missing).
    pub(crate) fn len_of(&self, j: usize) -> usize {
        self.get(j).map_or(0, T::len)
    }

    /// The argument indices by ascending cardinality, ties in argument
    /// order: the intersection walks the smallest.
    pub(crate) fn by_size(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.count()).collect();
        order.sort_by_key(|&j| self.len_of(j));
        order
    }

    /// A later argument names the first key (the difference is empty).
    pub(crate) fn first_repeated(&self) -> bool {
        (1..self.count()).any(|j| self.origin(j) == 0)
    }
}

/// Stores a result of `len` elements in `dst` (replacing it and its TTL)
/// or, when empty, deletes `dst`; replies with the cardinality. `event` is
/// the command's (`sinterstore`, `zunionstore`, …).
pub(crate) fn store_result(
    cx: &mut Ctx,
    dst: &[u8],
    result: Value,
    len: usize,
    class: Class,
    event: &'static str,
    out: &mut ReplyBuf,
) {
    cx.store_or_delete(dst, (len > 0).then_some(result), class, event, 1);
    out.int(len as i64);
}
