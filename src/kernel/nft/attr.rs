//! Netlink messages and attributes, written and read: plain bytes, no
//! socket.
//!
//! nfnetlink messages are a `struct nlmsghdr`, a `struct nfgenmsg` and
//! attributes. Integers in nf_tables attributes are big-endian (the kernel
//! reads them with `nla_get_be32`/`be64`), the netlink and nfgenmsg headers
//! are native-endian except `nfgenmsg.res_id`, which is big-endian. Nested
//! attributes carry `NLA_F_NESTED`, as nft sends them and the kernel dumps
//! them.

use rtnetlink::packet_core::{NLA_F_NESTED, NLA_TYPE_MASK};

use super::sys::{NFGENMSG_LEN, NFNETLINK_V0, NLMSG_HDRLEN};

/// `sizeof(struct nlattr)`.
const NLA_HDRLEN: usize = 4;

/// Round `n` up to netlink's 4-byte alignment.
pub const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// A buffer that netlink messages are written into. A length that does not
/// fit its field (a message over 4 GiB, an attribute over 64 KiB) is not
/// cut: the writer remembers it and [`Writer::finish`] fails.
#[derive(Debug)]
pub struct Writer {
    buf: Vec<u8>,
    too_long: bool,
    /// `NLA_F_NESTED`, or 0 to write nests as the kernel dumps them.
    nested: u16,
}

impl Default for Writer {
    fn default() -> Self {
        Writer {
            buf: Vec::new(),
            too_long: false,
            nested: NLA_F_NESTED,
        }
    }
}

impl Writer {
    /// An empty writer; nests carry `NLA_F_NESTED`, as nft sends them.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer whose nests carry no `NLA_F_NESTED`: nf_tables
    /// dumps nests without it (`nla_nest_start_noflag`), so this writes
    /// what the kernel dumps back of what [`Writer::new`] wrote.
    pub fn as_dumped() -> Self {
        Writer {
            nested: 0,
            ..Self::default()
        }
    }

    /// Append one message: its `nlmsghdr` (type `kind`, `flags`, `seq`,
    /// port 0), an `nfgenmsg` (`family`, version 0, `res_id`), then what
    /// `body` writes.
    pub fn message(
        &mut self,
        header: Header,
        family: u8,
        res_id: u16,
        body: impl FnOnce(&mut Writer),
    ) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&header.kind.to_ne_bytes());
        self.buf.extend_from_slice(&header.flags.to_ne_bytes());
        self.buf.extend_from_slice(&header.seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.push(family);
        self.buf.push(NFNETLINK_V0);
        self.buf.extend_from_slice(&res_id.to_be_bytes());
        body(self);
        match u32::try_from(self.buf.len() - start) {
            Ok(len) => self.buf[start..start + 4].copy_from_slice(&len.to_ne_bytes()),
            Err(_) => self.too_long = true,
        }
    }

    /// Append attribute `kind` with `value`, padded to 4 bytes.
    pub fn bytes(&mut self, kind: u16, value: &[u8]) {
        self.header(NLA_HDRLEN + value.len(), kind);
        self.buf.extend_from_slice(value);
        self.pad();
    }

    /// A NUL-terminated string attribute (`NLA_STRING`, `NLA_NUL_STRING`).
    pub fn string(&mut self, kind: u16, value: &str) {
        self.header(NLA_HDRLEN + value.len() + 1, kind);
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.push(0);
        self.pad();
    }

    /// A big-endian `u32` attribute.
    pub fn be32(&mut self, kind: u16, value: u32) {
        self.bytes(kind, &value.to_be_bytes());
    }

    /// A big-endian `u64` attribute. On machines where the kernel aligns
    /// 64-bit attributes (it has no efficient unaligned access), it also
    /// puts a pad attribute before one in its dumps; a request needs none.
    pub fn be64(&mut self, kind: u16, value: u64) {
        self.bytes(kind, &value.to_be_bytes());
    }

    /// A nested attribute `kind` (with `NLA_F_NESTED`) holding what `inner`
    /// writes.
    pub fn nest(&mut self, kind: u16, inner: impl FnOnce(&mut Writer)) {
        let start = self.buf.len();
        self.header(0, kind | self.nested);
        inner(self);
        match u16::try_from(self.buf.len() - start) {
            Ok(len) => self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes()),
            Err(_) => self.too_long = true,
        }
    }

    /// Append bytes that are already whole attributes (4-byte aligned).
    pub fn raw(&mut self, attributes: &[u8]) {
        self.buf.extend_from_slice(attributes);
        self.pad();
    }

    /// The bytes written, or `None` when a length did not fit its field.
    pub fn finish(self) -> Option<Vec<u8>> {
        (!self.too_long).then_some(self.buf)
    }

    fn header(&mut self, len: usize, kind: u16) {
        let len = u16::try_from(len).unwrap_or_else(|_| {
            self.too_long = true;
            0
        });
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
    }

    fn pad(&mut self) {
        self.buf.resize(align(self.buf.len()), 0);
    }
}

/// The fields of a `nlmsghdr` that a request sets.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
}

/// One netlink message of a datagram.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// The whole message, header included.
    pub bytes: &'a [u8],
}

impl<'a> Frame<'a> {
    /// What follows the netlink header.
    pub fn payload(&self) -> &'a [u8] {
        self.bytes.get(NLMSG_HDRLEN..).unwrap_or_default()
    }

    /// The attributes after the `nfgenmsg` of an nfnetlink message.
    pub fn attributes(&self) -> Attributes<'a> {
        attributes(self.payload().get(NFGENMSG_LEN..).unwrap_or_default())
    }

    /// `nfgenmsg.nfgen_family`.
    #[cfg(test)]
    pub fn family(&self) -> Option<u8> {
        self.payload().first().copied()
    }

    /// `nfgenmsg.res_id` (big-endian on the wire): in nf_tables answers,
    /// the low 16 bits of the ruleset generation they were read in.
    pub fn res_id(&self) -> Option<u16> {
        let p = self.payload();
        Some(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]))
    }
}

/// Each netlink message in `datagram`, up to the first that does not fit.
pub fn frames(datagram: &[u8]) -> impl Iterator<Item = Frame<'_>> {
    let mut rest = datagram;
    std::iter::from_fn(move || {
        let len = usize::try_from(u32::from_ne_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        let bytes = rest.get(..len).filter(|_| len >= NLMSG_HDRLEN)?;
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        let flags = u16::from_ne_bytes([bytes[6], bytes[7]]);
        let seq = u32::from_ne_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        rest = rest.get(align(len).min(rest.len())..)?;
        Some(Frame {
            kind,
            flags,
            seq,
            bytes,
        })
    })
}

/// An iterator over the attributes of a buffer: `(type without flags,
/// value)`, up to the first that does not fit.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Attributes<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        let len = usize::from(u16::from_ne_bytes([*rest.first()?, *rest.get(1)?]));
        let kind = u16::from_ne_bytes([*rest.get(2)?, *rest.get(3)?]) & NLA_TYPE_MASK;
        let value = rest.get(NLA_HDRLEN..len)?;
        self.rest = rest.get(align(len).min(rest.len())..)?;
        Some((kind, value))
    }
}

/// The attributes in `buf`.
pub fn attributes(buf: &[u8]) -> Attributes<'_> {
    Attributes { rest: buf }
}

/// The value of the first attribute `kind` in `buf`.
pub fn find(buf: &[u8], kind: u16) -> Option<&[u8]> {
    attributes(buf).find(|(k, _)| *k == kind).map(|(_, v)| v)
}

/// A big-endian `u32` value.
pub fn be32(value: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(value.try_into().ok()?))
}

/// A big-endian `u64` value.
pub fn be64(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}

/// A NUL-terminated string value, without its NUL (bytes: the kernel does
/// not require UTF-8).
pub fn string(value: &[u8]) -> &[u8] {
    value.strip_suffix(&[0]).unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_has_its_length_header_and_padded_attributes() {
        let mut w = Writer::new();
        let header = Header {
            kind: 0x0a00,
            flags: 5,
            seq: 7,
        };
        w.message(header, 1, 0, |w| {
            w.string(1, "ab");
            w.nest(4, |w| w.be32(1, 3));
        });
        let buf = w.finish().unwrap();
        assert_eq!(buf.len(), 16 + 4 + 8 + 12);
        let f = frames(&buf).next().unwrap();
        assert_eq!(
            (f.kind, f.flags, f.seq, f.family()),
            (0x0a00, 5, 7, Some(1))
        );
        let attrs: Vec<_> = f.attributes().collect();
        assert_eq!(attrs[0], (1, &b"ab\0"[..]));
        assert_eq!(attrs[1].0, 4);
        // The nest carries NLA_F_NESTED on the wire.
        assert_eq!(u16::from_ne_bytes([buf[30], buf[31]]), 4 | NLA_F_NESTED);
        assert_eq!(find(attrs[1].1, 1).and_then(be32), Some(3));
    }

    #[test]
    fn an_attribute_too_long_for_its_length_field_fails_the_writer() {
        let mut w = Writer::new();
        w.bytes(1, &vec![0; 70_000]);
        assert!(w.finish().is_none());
    }

    #[test]
    fn a_cut_datagram_yields_only_whole_messages() {
        let mut w = Writer::new();
        let h = Header {
            kind: 3,
            flags: 0,
            seq: 1,
        };
        w.message(h, 0, 0, |_| {});
        w.message(h, 0, 0, |_| {});
        let buf = w.finish().unwrap();
        assert_eq!(frames(&buf[..buf.len() - 1]).count(), 1);
    }
}
