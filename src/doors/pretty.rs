//! serde_json's pretty format (two-space indent), byte for byte, in fewer
//! writes: `PrettyFormatter` writes a line's indent one level at a time, so
//! a route's field at depth 3 cost four writes before its key. Here the
//! comma, the newline and the whole indent are one write, which makes
//! printing a description of 12 000 routes (3 MB) faster.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// `",\n"` and enough indent for every level a description has.
const BREAKS: &[u8; 2 + 2 * MAX_INLINE_DEPTH] = &{
    let mut b = [b' '; 2 + 2 * MAX_INLINE_DEPTH];
    b[0] = b',';
    b[1] = b'\n';
    b
};

/// Levels whose indent is one write; deeper lines are written in pieces.
const MAX_INLINE_DEPTH: usize = 32;

/// Serialize `value` as `serde_json::to_writer_pretty` does.
pub fn to_writer<W: Write, T: Serialize + ?Sized>(writer: W, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(writer, Pretty::default());
    value.serialize(&mut ser)
}

/// The formatter: serde_json's `PrettyFormatter` with a two-space indent.
#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    /// A new line at the current depth, after a comma unless `first`.
    fn line<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        let start = usize::from(first);
        if self.depth <= MAX_INLINE_DEPTH {
            return w.write_all(&BREAKS[start..2 + 2 * self.depth]);
        }
        w.write_all(&BREAKS[start..2 + 2 * MAX_INLINE_DEPTH])?;
        for _ in MAX_INLINE_DEPTH..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(w, true)?;
        }
        w.write_all(bracket)
    }
}

impl Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.line(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.line(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ours<T: Serialize + ?Sized>(value: &T) -> String {
        let mut out = Vec::new();
        to_writer(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_what_serde_json_pretty_writes() {
        let values = [
            json!(null),
            json!([]),
            json!({}),
            json!([[], {}, [[]], [{}], {"a": []}, {"a": {}}]),
            json!({"a": 1, "b": [1, 2, {"c": "d\n\"e\""}], "f": {"g": null, "h": [true]}}),
            json!([1, [2, [3, [4]]], {"x": {"y": {"z": [{}]}}}]),
        ];
        for v in &values {
            assert_eq!(ours(v), serde_json::to_string_pretty(v).unwrap(), "{v}");
        }
    }

    #[test]
    fn lines_deeper_than_one_write_holds_are_indented_in_full() {
        let mut deep = json!("leaf");
        for i in 0..(MAX_INLINE_DEPTH + 5) {
            deep = if i % 2 == 0 {
                json!([deep, 1])
            } else {
                json!({"k": deep, "n": 2})
            };
        }
        assert_eq!(ours(&deep), serde_json::to_string_pretty(&deep).unwrap());
    }

    #[test]
    fn a_description_prints_as_serde_json_pretty_prints_it() {
        let desc = crate::render::fixture::pod();
        assert_eq!(ours(&desc), serde_json::to_string_pretty(&desc).unwrap());
    }
}
