//! Runs the socket filter through a small classic-BPF interpreter (the
//! opcodes the filter uses) on frames of every kind.

use super::*;
use crate::serve::socket::FILTER;

/// Returns the filter's verdict (bytes to keep, 0 = drop).
fn run(pkt: &[u8], pkttype: u32, vlan: bool) -> u32 {
    let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
    let load = |off: u32, n: usize| -> Option<u32> {
        match off {
            0xffff_f004 => Some(pkttype),
            0xffff_f030 => Some(u32::from(vlan)),
            _ => {
                let s = pkt.get(off as usize..off as usize + n)?;
                Some(s.iter().fold(0u32, |acc, b| acc << 8 | u32::from(*b)))
            }
        }
    };
    loop {
        let i = FILTER[pc];
        pc += 1;
        let v = match i.code {
            0x20 => load(i.k, 4),
            0x28 => load(i.k, 2),
            0x30 => load(i.k, 1),
            0x48 => load(x + i.k, 2),
            0xb1 => {
                x = 4 * (load(i.k, 1).unwrap_or(0) & 0xf);
                continue;
            }
            0x15 | 0x45 => {
                let hit = if i.code == 0x15 {
                    a == i.k
                } else {
                    a & i.k != 0
                };
                pc += usize::from(if hit { i.jt } else { i.jf });
                continue;
            }
            0x06 => return i.k,
            c => panic!("opcode {c:#x}"),
        };
        match v {
            Some(v) => a = v,
            None => return 0, // out of bounds load: the kernel drops
        }
    }
}

fn pass(f: &[u8]) -> bool {
    run(f, 0, false) > 0
}

#[test]
fn filter_passes_what_we_answer() {
    assert!(pass(&Dhcp4::new(1).frame()));
    assert!(pass(&dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID)])));
    assert!(pass(&rs(guest_ll())));
    assert!(pass(&ns(guest_ll(), guest_ll())));
}

#[test]
fn filter_drops_everything_else() {
    let mut to68 = Dhcp4::new(1).frame();
    to68[37] = 68;
    assert!(!pass(&to68), "UDP to 68");
    let mut tcp = Dhcp4::new(1).frame();
    tcp[23] = 6;
    assert!(!pass(&tcp), "TCP");
    let mut frag = Dhcp4::new(1).frame();
    frag[21] = 8;
    assert!(!pass(&frag), "non-first fragment");
    let mut opts = Dhcp4::new(1).frame();
    opts[14] = 0x46; // IHL 6: port read 4 bytes later
    assert!(!pass(&opts));
    let ra = icmp6_frame(guest_ll(), v6("ff02::1"), 255, &[134, 0, 0, 0, 0, 0, 0, 0]);
    assert!(!pass(&ra), "RA");
    let mut vlan = Dhcp4::new(1).frame();
    vlan.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    assert!(!pass(&vlan), "in-band tag");
    assert_eq!(run(&Dhcp4::new(1).frame(), 0, true), 0, "offloaded tag");
    assert_eq!(
        run(&Dhcp4::new(1).frame(), 4, false),
        0,
        "our own outgoing frame"
    );
    let mut ext = dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID)]);
    ext[20] = 0;
    assert!(!pass(&ext), "extension header");
    assert!(!pass(&[0u8; 10]), "runt");
}
