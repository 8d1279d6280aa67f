//! The hardening of an ELF executable from its headers: the ELF header's
//! type, the program headers (`PT_GNU_RELRO`, `PT_GNU_STACK`, `PT_INTERP`,
//! `PT_DYNAMIC`) and the dynamic section's flags. 64-bit little-endian only
//! (x86_64, aarch64, riscv64); reads are bounded.

use super::checks::Hardening;

const ET_DYN: u16 = 3;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_GNU_STACK: u32 = 0x6474_e551;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_X: u32 = 1;
const DT_BIND_NOW: u64 = 24;
const DT_FLAGS: u64 = 30;
const DT_FLAGS_1: u64 = 0x6fff_fffb;
const DF_BIND_NOW: u64 = 0x8;
const DF_1_NOW: u64 = 0x1;
/// More program headers or dynamic entries than this is not an executable podtap built.
const MAX_PHDRS: usize = 256;
const MAX_DYNAMIC: usize = 64 * 1024;

/// Read `len` bytes at `offset` of the file, or `None`.
pub type ReadAt<'a> = &'a dyn Fn(u64, usize) -> Option<Vec<u8>>;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The hardening of the file `read` reads.
pub fn hardening(read: ReadAt) -> Result<Hardening, String> {
    let header = read(0, 64).ok_or("cannot read the ELF header")?;
    if header.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if header.get(4..6) != Some([2u8, 1].as_slice()) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let bad = || "truncated ELF header".to_string();
    let e_type = u16_at(&header, 16).ok_or_else(bad)?;
    let phoff = u64_at(&header, 32).ok_or_else(bad)?;
    let phentsize = usize::from(u16_at(&header, 54).ok_or_else(bad)?);
    let phnum = usize::from(u16_at(&header, 56).ok_or_else(bad)?);
    if phentsize < 56 || phnum > MAX_PHDRS {
        return Err("unexpected program header table".into());
    }
    let table = read(phoff, phentsize * phnum).ok_or("cannot read the program headers")?;
    let mut h = Hardening {
        pie: e_type == ET_DYN,
        is_static: true,
        ..Hardening::default()
    };
    let mut dynamic = None;
    for ph in table.chunks_exact(phentsize) {
        let (kind, flags) = (
            u32_at(ph, 0).ok_or_else(bad)?,
            u32_at(ph, 4).ok_or_else(bad)?,
        );
        match kind {
            PT_GNU_RELRO => h.relro = true,
            PT_GNU_STACK => h.nx_stack = flags & PF_X == 0,
            PT_INTERP => h.is_static = false,
            PT_DYNAMIC => {
                h.is_static = false;
                dynamic = Some((
                    u64_at(ph, 8).ok_or_else(bad)?,
                    u64_at(ph, 32).ok_or_else(bad)?,
                ));
            }
            _ => {}
        }
    }
    if let Some((offset, size)) = dynamic {
        let size = usize::try_from(size).unwrap_or(usize::MAX).min(MAX_DYNAMIC);
        let entries = read(offset, size).ok_or("cannot read the dynamic section")?;
        h.bind_now = bind_now(&entries);
    }
    Ok(h)
}

/// Whether the dynamic entries ask for every symbol to be bound at load.
fn bind_now(entries: &[u8]) -> bool {
    entries.chunks_exact(16).any(|e| {
        let (tag, val) = (u64_at(e, 0).unwrap_or(0), u64_at(e, 8).unwrap_or(0));
        tag == DT_BIND_NOW
            || (tag == DT_FLAGS && val & DF_BIND_NOW != 0)
            || (tag == DT_FLAGS_1 && val & DF_1_NOW != 0)
    })
}

/// [`hardening`] of a file on disk (`/proc/self/exe`), read with pread.
pub fn hardening_of(path: &std::path::Path) -> Result<Hardening, String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let read = |offset: u64, len: usize| {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset).ok().map(|()| buf)
    };
    hardening(&read)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE file: header, `phdrs` as (type, flags, offset,
    /// filesz), then `tail` at offset 0x200.
    fn elf(e_type: u16, phdrs: &[(u32, u32, u64, u64)], tail: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 0x200];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&u16::try_from(phdrs.len()).unwrap().to_le_bytes());
        for (i, (kind, flags, off, size)) in phdrs.iter().enumerate() {
            let at = 64 + i * 56;
            f[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            f[at + 4..at + 8].copy_from_slice(&flags.to_le_bytes());
            f[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
        }
        f.extend_from_slice(tail);
        f
    }

    fn read_of(f: &[u8]) -> impl Fn(u64, usize) -> Option<Vec<u8>> + '_ {
        move |off, len| {
            let off = usize::try_from(off).ok()?;
            f.get(off..off + len).map(<[u8]>::to_vec)
        }
    }

    #[test]
    fn a_hardened_pie_and_a_static_non_pie() {
        let mut dynamic = Vec::new();
        for (tag, val) in [(DT_FLAGS_1, DF_1_NOW | 0x0800_0000), (0, 0)] {
            dynamic.extend_from_slice(&tag.to_le_bytes());
            dynamic.extend_from_slice(&val.to_le_bytes());
        }
        let pie = elf(
            ET_DYN,
            &[
                (PT_INTERP, 4, 0, 0),
                (PT_DYNAMIC, 6, 0x200, 32),
                (PT_GNU_RELRO, 4, 0, 0),
                (PT_GNU_STACK, 6, 0, 0),
            ],
            &dynamic,
        );
        let h = hardening(&read_of(&pie)).unwrap();
        assert_eq!(
            h,
            Hardening {
                pie: true,
                relro: true,
                bind_now: true,
                nx_stack: true,
                is_static: false
            }
        );
        let exec_stack = elf(2, &[(PT_GNU_RELRO, 4, 0, 0), (PT_GNU_STACK, 7, 0, 0)], &[]);
        let h = hardening(&read_of(&exec_stack)).unwrap();
        assert!(!h.pie && h.relro && !h.nx_stack && h.is_static && !h.bind_now);
        assert!(hardening(&read_of(b"#!/bin/sh\n")).is_err());
    }

    #[test]
    fn this_test_binary_parses() {
        assert!(hardening_of(std::path::Path::new("/proc/self/exe")).is_ok());
    }
}
